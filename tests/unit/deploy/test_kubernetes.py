"""deploy/kubernetes validates offline: core objects against Kubernetes' schemas, CRDs by shape."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from lanewatch.alerts.build import KUBERNETES_DIR
from lanewatch.collector.config import load_config
from lanewatch.collector.degrade.adapters import GatewaySettings
from lanewatch.collector.degrade.policy import load_policy

K8S_VERSION = "1.30.0"
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}


def documents() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(KUBERNETES_DIR.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out.extend((path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc)
    return out


DOCS = documents()
CORE = [(f, d) for f, d in DOCS if (d["apiVersion"], d["kind"]) not in CRDS]


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in DOCS if d["kind"] == kind]


@pytest.mark.parametrize(
    ("file", "doc"), CORE, ids=lambda x: x if isinstance(x, str) else x["metadata"]["name"]
)
def test_core_objects_validate_strictly(file: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_manifests_hold_what_the_stack_needs() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in DOCS}
    for name in ("lanewatch-collector", "lanewatch-gateway", "lanewatch-degrade", "vllm-fast", "vllm-slow"):
        assert ("Deployment", name) in kinds and ("Service", name) in kinds
    assert {n for k, n in kinds if k == "ServiceMonitor"} == {
        "lanewatch-collector",
        "lanewatch-gateway",
        "lanewatch-degrade",
        "vllm",
    }
    assert ("PrometheusRule", "lanewatch-slos") in kinds
    assert all(d["metadata"].get("namespace") == "lanewatch" for _, d in DOCS if d["kind"] != "Namespace")
    assert not of_kind("Secret"), "secrets are created by hand, never committed"


def test_a_schema_violation_is_caught() -> None:
    deployment = next(d for d in of_kind("Deployment"))
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


@pytest.mark.parametrize("monitor", of_kind("ServiceMonitor"), ids=lambda d: d["metadata"]["name"])
def test_service_monitors_select_a_service_and_a_named_port(monitor: dict[str, Any]) -> None:
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    spec = monitor["spec"]
    assert set(spec) <= {"selector", "endpoints", "targetLabels", "jobLabel", "namespaceSelector"}
    wanted = spec["selector"]["matchLabels"]
    services = [s for s in of_kind("Service") if wanted.items() <= s["metadata"]["labels"].items()]
    assert services, f"{monitor['metadata']['name']} selects no Service"
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= {"port", "path", "interval", "scheme", "scrapeTimeout"}
        assert endpoint["path"] == "/metrics" and endpoint["interval"].endswith("s")
        for service in services:
            assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
            for label in spec.get("targetLabels", []):
                assert label in service["metadata"]["labels"]


def test_scrape_jobs_match_the_component_down_alert() -> None:
    """Without jobLabel a ServiceMonitor's job is the Service name; LanewatchComponentDown matches them."""
    rule = yaml.safe_load((KUBERNETES_DIR / "prometheusrule-lanewatch.yaml").read_text())
    (expr,) = [
        r["expr"]
        for g in rule["spec"]["groups"]
        for r in g["rules"]
        if r.get("alert") == "LanewatchComponentDown"
    ]
    regex = expr.split('job=~"')[1].split('"')[0]
    for monitor in of_kind("ServiceMonitor"):
        for service in of_kind("Service"):
            if monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items():
                assert re.fullmatch(regex, service["metadata"]["name"]), service["metadata"]["name"]


def test_vllm_runs_with_the_flags_lanewatch_needs() -> None:
    for deployment in of_kind("Deployment"):
        if not deployment["metadata"]["name"].startswith("vllm-"):
            continue
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        args = " ".join(container["args"])
        for flag in ("--enable-prefix-caching", "--enable-chunked-prefill", "--enable-request-id-headers"):
            assert flag in args
        assert "--otlp-traces-endpoint=http://lanewatch-collector.lanewatch.svc:9464/v1/traces" in args
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_embedded_config_and_policy_load(tmp_path: Path) -> None:
    (config,) = [d for d in of_kind("ConfigMap") if d["metadata"]["name"] == "lanewatch-config"]
    (tmp_path / "lanewatch.yaml").write_text(config["data"]["lanewatch.yaml"])
    cfg = load_config(tmp_path / "lanewatch.yaml")
    assert [t.lane for t in cfg.targets] == ["fast", "slow"]
    vllm_args = {
        d["metadata"]["labels"]["lane"]: d["spec"]["template"]["spec"]["containers"][0]["args"]
        for d in of_kind("Deployment")
        if d["metadata"]["name"].startswith("vllm-")
    }
    for target in cfg.targets:  # each lane declares the model its vLLM serves, so a shift can rewrite
        assert cfg.gateway.lanes[target.lane].models == [target.model]
        assert f"--model={target.model}" in vllm_args[target.lane]
    (entry,) = cfg.degrade.adapters  # the controller drives the gateway's Service with its admin token
    assert isinstance(entry, GatewaySettings)
    assert (entry.url, entry.token_file) == (
        "http://lanewatch-gateway.lanewatch.svc:8080",
        cfg.gateway.admin_token_file,
    )
    (policy,) = [d for d in of_kind("ConfigMap") if d["metadata"]["name"] == "lanewatch-degrade-policy"]
    (tmp_path / "policy.yaml").write_text(policy["data"]["policy.yaml"])
    assert load_policy(tmp_path / "policy.yaml").lane_order == ("fast", "slow")


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((KUBERNETES_DIR / "kustomization.yaml").read_text())
    files = {p.name for p in KUBERNETES_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files


def test_dashboards_configmap_has_the_sidecar_label() -> None:
    (cm,) = [d for d in of_kind("ConfigMap") if d["metadata"]["name"] == "lanewatch-dashboards"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert len(cm["data"]) == 5


def _secret_mount(deployment: str) -> str:
    (d,) = [x for x in of_kind("Deployment") if x["metadata"]["name"] == deployment]
    spec = d["spec"]["template"]["spec"]
    secrets = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == "lanewatch-tokens"]
    (volume,) = [v["name"] for v in secrets]
    (container,) = spec["containers"]
    (mount,) = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume]
    return str(mount)


def test_the_collector_asks_each_reporter_for_its_token_from_the_secret(tmp_path: Path) -> None:
    """The embedded config, as the collector loads it, with the Secret's files where it mounts them;
    the guard turned on as the config's comment says: it starts behind the tokens, and not without."""
    from fastapi.testclient import TestClient

    from lanewatch.collector.collect.service import CollectorService
    from lanewatch.collector.common.errors import ConfigError

    (config,) = [d for d in of_kind("ConfigMap") if d["metadata"]["name"] == "lanewatch-config"]
    data = yaml.safe_load(config["data"]["lanewatch.yaml"])
    assert data["server"]["host"] == "0.0.0.0"
    header = (KUBERNETES_DIR / "config.yaml").read_text().split("apiVersion")[0]
    mount = _secret_mount("lanewatch-collector")
    assert mount == _secret_mount("lanewatch-gateway")
    reporters = {r["name"]: r for r in data["ingest"]["reporters"]}
    for r in reporters.values():  # a key of the Secret, made by the documented command
        key = Path(r["token_file"])
        assert str(key.parent) == mount and f"--from-literal={key.name}=$(openssl rand -hex 32)" in header
    gateway = reporters[data["gateway"]["reporter_name"]]
    assert data["gateway"]["collector_token_file"] == gateway["token_file"]
    assert gateway["feeds"] == ["progress", "tap"] and reporters["vllm"]["feeds"] == []
    for deployment in of_kind("Deployment"):  # vLLM's exporter sends its reporter's token
        if deployment["metadata"]["name"].startswith("vllm-"):
            env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
            ref = env["LANEWATCH_INGEST_TOKEN"]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": "lanewatch-tokens", "key": Path(reporters["vllm"]["token_file"]).name}
            assert env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"]["value"] == (
                "authorization=Bearer%20$(LANEWATCH_INGEST_TOKEN)"
            )
    alertmanager = "http://alertmanager-operated.monitoring.svc:9093"  # as the config's comment has it
    data["guard"] = {"enabled": True, "alertmanager_urls": [alertmanager]}
    for i, r in enumerate(data["ingest"]["reporters"]):
        r["token_file"] = str(tmp_path / f"token-{i}")
        (tmp_path / f"token-{i}").write_text(f"t0k{i}\n")
    here = tmp_path / "lanewatch.yaml"
    here.write_text(yaml.safe_dump(data))
    service = CollectorService.from_config(load_config(here), source_factory=None)
    assert service.guard is not None and not service.ingest_auth.open
    client = TestClient(service.app())
    body = b'{"reporter": "gateway-pod-1", "events": []}'
    json_ = {"content-type": "application/json"}
    assert client.post("/v1/progress", content=body, headers=json_).status_code == 401
    ok = {**json_, "authorization": "Bearer t0k0"}
    assert client.post("/v1/progress", content=body, headers=ok).status_code == 200
    del data["ingest"]
    here.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"needs ingest\.token_file \(or ingest\.reporters\)"):
        load_config(here)
