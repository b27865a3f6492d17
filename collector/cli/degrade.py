"""`lanewatch degrade`: the controller that turns Alertmanager alerts into router degrade actions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .app import app
from .fail import RUNTIME, USAGE, fail

if TYPE_CHECKING:
    from lanewatch.collector.degrade.audit_diagnosis import DiagnosisContext
    from lanewatch.collector.diagnose import Thresholds

degrade_app = typer.Typer(
    rich_markup_mode=None,
    help=(
        "The degrade controller: Alertmanager posts alerts to it; it shifts lanes to faster ones, "
        "caps max_tokens and sheds batch traffic through router adapters, holds with hysteresis, "
        "and restores once the alerts resolve."
    ),
    no_args_is_help=True,
)
app.add_typer(degrade_app, name="degrade", short_help="The degrade controller behind Alertmanager.")


@degrade_app.command("serve")
def serve(
    config: Path | None = typer.Option(
        None, "-c", "--config", help="YAML config file (its `degrade:` section), as for every command."
    ),
    policy: Path | None = typer.Option(
        None, "--policy", help="Policy YAML (degrade.policy_file); default: the built-in policy."
    ),
    host: str | None = typer.Option(None, "--host", help="Address to listen on (default: 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", help="Port to listen on (default: 9097)."),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="File holding the bearer token Alertmanager must send (required)."
    ),
    gateway: str | None = typer.Option(None, "--gateway", help="Base URL of the lanewatch gateway to drive."),
    gateway_token_file: Path | None = typer.Option(
        None, "--gateway-token-file", help="File holding the gateway's admin bearer token."
    ),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", help="Directory for the state and audit log (SQLite) (default: lanewatch-state)."
    ),
    min_hold_s: float | None = typer.Option(
        None, "--min-hold-s", help="Seconds a degrade step stays at least (overrides the policy)."
    ),
    recovery_stable_s: float | None = typer.Option(
        None, "--recovery-stable-s", help="Seconds all alerts must stay resolved before restoring."
    ),
    escalation_cooldown_s: float | None = typer.Option(
        None, "--escalation-cooldown-s", help="Seconds between escalation steps while an alert fires."
    ),
    insecure_dev: bool = typer.Option(
        False, "--insecure-dev", help="Allow starting without --token-file: accepts UNAUTHENTICATED posts."
    ),
    adapter: list[str] | None = typer.Option(
        None,
        "--adapter",
        help=(
            "Adapter kind to drive (repeatable), as configured in degrade.adapters or with its defaults "
            "(default: gateway when --gateway is given). `lanewatch degrade adapters` lists the kinds."
        ),
    ),
    webhook_url: str | None = typer.Option(None, "--webhook-url", help="URL the webhook adapter POSTs to."),
    webhook_secret_file: Path | None = typer.Option(
        None, "--webhook-secret-file", help="File holding the webhook adapter's HMAC-SHA256 key."
    ),
    tick_s: float | None = typer.Option(
        None, "--tick-s", help="Seconds between hysteresis checks (default: 1)."
    ),
    reconcile_interval_s: float | None = typer.Option(
        None,
        "--reconcile-interval-s",
        help="Seconds between re-applies of the state to routers (default: 15).",
    ),
    apply_timeout_s: float | None = typer.Option(
        None,
        "--apply-timeout-s",
        help="Seconds one adapter's apply may take, all its calls together, before it is cancelled, "
        "audited and retried; no other adapter waits for it (default: 5).",
    ),
    prometheus: str | None = typer.Option(
        None,
        "--prometheus",
        help="Prometheus base URL: each action's audit entry carries a diagnosis of the lane from it.",
        show_default=False,
    ),
    diagnose_window: str | None = typer.Option(
        None, "--diagnose-window", help="The range that diagnosis covers (default: 5m).", show_default=False
    ),
    slo_spec: Path | None = typer.Option(
        None,
        "--slo-spec",
        help="SLO spec anchoring that diagnosis (default: the bundled alerts/slos.yaml).",
        show_default=False,
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Serve POST /alertmanager, GET /healthz and GET /metrics until SIGINT or SIGTERM."""
    import asyncio
    import logging

    from lanewatch.collector.common.settings import Flag, OverrideError, override
    from lanewatch.collector.common.validation import check_http_url
    from lanewatch.collector.config import ConfigError, load_config
    from lanewatch.collector.degrade.adapters import choose
    from lanewatch.collector.degrade.pair import LeadershipLost
    from lanewatch.collector.degrade.runner import SetupError
    from lanewatch.collector.degrade.runner import serve as run_controller
    from lanewatch.collector.degrade.store import StoreError

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per reconcile call is noise
    flags = {
        "policy_file": Flag("--policy", policy),
        "server.host": Flag("--host", host),
        "server.port": Flag("--port", port),
        "token_file": Flag("--token-file", token_file),
        "gateway_url": Flag("--gateway", gateway),
        "gateway_token_file": Flag("--gateway-token-file", gateway_token_file),
        "state_dir": Flag("--state-dir", state_dir),
        "min_hold_s": Flag("--min-hold-s", min_hold_s),
        "recovery_stable_s": Flag("--recovery-stable-s", recovery_stable_s),
        "escalation_cooldown_s": Flag("--escalation-cooldown-s", escalation_cooldown_s),
        "insecure_dev": Flag("--insecure-dev", insecure_dev or None),
        "webhook_url": Flag("--webhook-url", webhook_url),
        "webhook_secret_file": Flag("--webhook-secret-file", webhook_secret_file),
        "tick_s": Flag("--tick-s", tick_s),
        "reconcile_interval_s": Flag("--reconcile-interval-s", reconcile_interval_s),
        "apply_timeout_s": Flag("--apply-timeout-s", apply_timeout_s),
        "prometheus_url": Flag("--prometheus", prometheus),
        "diagnose_window": Flag("--diagnose-window", diagnose_window),
    }
    for name, url in (("--gateway", gateway), ("--webhook-url", webhook_url), ("--prometheus", prometheus)):
        try:
            check_http_url(url) if url is not None else None
        except ValueError as exc:
            fail("degrade serve", f"{name}: {exc}")
    try:
        loaded = load_config(config)
        base = loaded.degrade  # the file's degrade section, then LANEWATCH__DEGRADE__*
        if adapter:  # the file's entries of each kind named, else that kind with its defaults
            flags["adapters"] = Flag("--adapter", choose(base.adapters, adapter))
        cfg = override(base, {k: f for k, f in flags.items() if f.value is not None}, "degrade.")
        context = _diagnosis_context(slo_spec, loaded.diagnose) if cfg.prometheus_url else None
        asyncio.run(run_controller(cfg, context))
    except (ConfigError, OverrideError, SetupError, StoreError, LeadershipLost) as exc:
        fail("degrade serve", exc)  # exit 2 for bad settings, 1 for a failure (a lost lead)


def _diagnosis_context(slo_spec: Path | None, thresholds: Thresholds) -> DiagnosisContext:
    """The SLOs, lane pairs and thresholds the controller's diagnoses are anchored to."""
    from lanewatch.alerts.spec import DEFAULT_SPEC, SpecError, load_spec
    from lanewatch.collector.degrade.audit_diagnosis import DiagnosisContext
    from lanewatch.collector.diagnose import slo_targets
    from lanewatch.collector.record.goodput import from_spec

    try:
        spec = load_spec(slo_spec or DEFAULT_SPEC)
    except SpecError as exc:
        fail("degrade serve", f"--slo-spec: {exc}")
    pairs = tuple((c.fast, c.slow) for c in spec.convergence)
    return DiagnosisContext(slo_targets(from_spec(spec)), pairs, thresholds)


@degrade_app.command("adapters")
def adapters(
    markdown: bool = typer.Option(False, "--markdown", help="Print the table docs/degrade.md carries."),
) -> None:
    """List the adapter kinds: the actions each router can take, its settings, what it is."""
    from lanewatch.collector.degrade.adapters import REGISTRY
    from lanewatch.collector.degrade.adapters.base import CAPABILITY_NAMES

    if markdown:
        typer.echo(REGISTRY.table())
        return
    for kind in REGISTRY.kinds():
        settings = REGISTRY.settings(kind)
        can = ", ".join(a for a in CAPABILITY_NAMES if a in settings.capabilities) or "nothing"
        fields = ", ".join(f for f in settings.model_fields if f != "kind")
        typer.echo(f"{kind}: {REGISTRY.summary(kind)}\n  can: {can}\n  settings: {fields}")


@degrade_app.command("envoy-routes")
def envoy_routes(
    out: Path = typer.Option(
        ...,
        "--out",
        help="The route file to write: the bootstrap's path_config_source.path (the adapter's route_file).",
    ),
    template: Path | None = typer.Option(
        None,
        "--template",
        help="The route template (the adapter's route_template; default: deploy/envoy/routes.template.yaml).",
        show_default=False,
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace a route file that is there (it may hold a live degrade)."
    ),
) -> None:
    """Write Envoy's first route file: the template with no lane degraded.

    Envoy (and `envoy --mode validate`) refuses the bootstrap until the file exists. Exit
    status: 0 when written, 2 on a bad template or a file already there without --force.
    """
    from lanewatch.collector.common.errors import LanewatchError
    from lanewatch.collector.degrade.adapters.envoy_first_routes import default_template, write_first_routes

    source = template or default_template()
    try:
        write_first_routes(source, out, replace=force)
    except FileExistsError:
        fail("degrade envoy-routes", f"{out} exists (it may hold a live degrade); --force replaces it")
    except OSError as exc:
        fail("degrade envoy-routes", f"{exc.filename or source}: {exc.strerror}")
    except LanewatchError as exc:
        fail("degrade envoy-routes", f"{source}: {exc}", USAGE)
    typer.echo(f"wrote {out} from {source}")


@degrade_app.command("status")
def status(
    state_dir: Path | None = typer.Option(None, "--state-dir", help="The controller's state directory."),
    shared_store: str | None = typer.Option(
        None,
        "--shared-store",
        help="A controller pair's PostgreSQL (its degrade.shared_store.url): also shows which one leads.",
        show_default=False,
    ),
    password_file: Path | None = typer.Option(
        None, "--password-file", help="File holding the shared store's password.", show_default=False
    ),
    controller: str | None = typer.Option(
        None,
        "--controller",
        help="Base URL of the running controller: show what each router reports it holds (GET /routers).",
        show_default=False,
    ),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="File holding the controller's bearer token (its --token-file)."
    ),
    last: int = typer.Option(20, "--last", min=0, help="How many audit entries to show."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Print the degrade state and the last audit entries (read-only; safe while serving).

    With --controller, also each router's read-back beside the desired state. Exit status: 0,
    1 when the state dir or the controller cannot be read, 2 on a bad flag, 3 when a router
    holds other lanes than the desired state or cannot be read back (stale).
    """
    import json

    from lanewatch.collector.common.secrets import read_secret
    from lanewatch.collector.common.validation import check_http_url
    from lanewatch.collector.degrade.readback import exit_status, report_lines
    from lanewatch.collector.degrade.routers_client import ControllerError, fetch_routers

    if state_dir is not None and shared_store is not None:
        fail("degrade status", "give --state-dir (one controller) or --shared-store (a pair), not both")
    if state_dir is None and shared_store is None and controller is None:
        fail("degrade status", "give --state-dir or --shared-store, --controller, or both")
    stored = None
    if state_dir is not None:
        stored = _stored_status(state_dir, last, as_json)
    elif shared_store is not None:
        stored = _shared_status(shared_store, password_file, last, as_json)
    if controller is None:
        typer.echo(stored)
        return
    try:
        url = check_http_url(controller)
    except ValueError as exc:
        fail("degrade status", f"--controller: {exc}")
    try:
        token = read_secret(token_file, "--token-file") if token_file is not None else None
    except ValueError as exc:
        fail("degrade status", exc)
    try:
        routers = fetch_routers(url, token)
    except ControllerError as exc:
        fail("degrade status", exc, RUNTIME)
    if as_json:
        out = {**(json.loads(stored) if stored is not None else {}), "read_back": routers}
        typer.echo(json.dumps(out, indent=2, sort_keys=True))
    else:
        typer.echo("\n".join([*([stored] if stored is not None else []), *report_lines(routers)]))
    raise typer.Exit(exit_status(routers))


def _shared_status(url: str, password_file: Path | None, last: int, as_json: bool) -> str:
    """A pair's report from its shared store: who leads, then what `_stored_status` shows."""
    from pydantic import ValidationError

    from lanewatch.collector.common.secrets import read_secret
    from lanewatch.collector.degrade.settings import SharedStoreConfig
    from lanewatch.collector.degrade.shared_store import SharedStore, connect
    from lanewatch.collector.degrade.status import status_json, status_text
    from lanewatch.collector.degrade.store import StoreError

    try:
        checked = SharedStoreConfig(url=url)
        password = read_secret(password_file, "--password-file") if password_file is not None else None
    except ValidationError as exc:
        fail("degrade status", f"--shared-store: {exc.errors()[0]['msg']}")
    except ValueError as exc:
        fail("degrade status", exc)
    try:
        store = SharedStore(
            lambda: connect(checked.url, password, checked.timeout_s), "status", readonly=True
        )
        try:
            snap, entries, adapters, lease = store.load(), store.recent(last), store.adapters(), store.lease()
        finally:
            store.close()
    except StoreError as exc:
        fail("degrade status", exc, RUNTIME)
    if as_json:
        return status_json(snap, entries, adapters, paired=True, lease=lease)
    return status_text(snap, entries, adapters, paired=True, lease=lease)


def _stored_status(state_dir: Path, last: int, as_json: bool) -> str:
    """The store's report: the state, each adapter's last apply and error, the last audit entries."""
    from lanewatch.collector.degrade.status import status_json, status_text
    from lanewatch.collector.degrade.store import Store, StoreError

    try:
        store = Store(state_dir, readonly=True)
    except StoreError as exc:
        fail("degrade status", exc, RUNTIME)
    try:
        snap, entries, adapters = store.load(), store.recent(last), store.adapters()
    finally:
        store.close()
    return status_json(snap, entries, adapters) if as_json else status_text(snap, entries, adapters)
