"""A request's class by the operator's rules: the rules' settings and the pure first match, shared
by the gateway, the controller's router adapters and the LiteLLM handler."""
