"""The compose stack: the file against the compose specification (offline, check-jsonschema's
vendored `compose-spec` schema), its profiles against the table of docs/running.md,
healthchecks, the wiring of each demo variant to its server, the nginx configuration of `scale`,
and the documented `openai` SDK recipe run against a real server. Docker itself is not needed:
the file is parsed.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from server.config import build_parser

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
COMPOSE = ROOT / "docker-compose.yml"
NGINX = ROOT / "deploy" / "nginx.conf"
DEMO_PORT = 8765
LLM_ENV = ("DUPLEX_LLM_URL", "DUPLEX_LLM_MODEL", "DUPLEX_LLM_API_KEY")
"""The LLM responder's variables (`--llm-url`, `--llm-model`, and the key, from the
environment only), which arrive with the responder itself (issue 14 item 1)."""


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def readme_profiles() -> dict[str, set[str]]:
    """Profile -> services, from the table of docs/running.md ("(none)": the services of no
    profile)."""
    running = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    section = running[running.index("## Docker"):]
    rows = re.findall(r"^\| (\(none\)|`[a-z-]+`) \| ([^|]+) \|", section, flags=re.MULTILINE)
    return {profile.strip("`"): set(re.findall(r"`([a-z-]+)`", names))
            for profile, names in rows}


def is_demo(service: dict[str, Any]) -> bool:
    return service.get("image") == "duplex-voice-demo:latest"


def test_the_compose_file_matches_the_compose_spec_offline() -> None:
    result = subprocess.run(
        [BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_profile_has_the_services_the_readme_lists() -> None:
    by_profile: dict[str, set[str]] = {}
    for name, service in services().items():
        for profile in service.get("profiles", ["(none)"]):
            by_profile.setdefault(profile, set()).add(name)
    assert readme_profiles() == by_profile
    assert by_profile["(none)"] == {"demo"}
    assert set(by_profile) == {"(none)", "llm", "llm-gpu", "asr", "scale"}


def test_every_long_running_service_has_a_healthcheck() -> None:
    all_services = services()
    one_shot = {name for name, service in all_services.items()
                if service.get("restart") == "no"}
    for name, service in all_services.items():
        if name in one_shot:
            continue
        check = service.get("healthcheck")
        assert check and check["test"][0] == "CMD", name
        assert {"interval", "timeout", "retries", "start_period"} <= check.keys(), name
        assert service.get("restart") == "unless-stopped", name
    for name in one_shot:
        waiting = [other for other, service in all_services.items()
                   if service.get("depends_on", {}).get(name, {}).get("condition")
                   == "service_completed_successfully"]
        assert waiting, f"{name} runs once but nothing waits for it to succeed"


def test_demo_healthchecks_ask_the_demo_health_endpoint() -> None:
    demos = {name: service for name, service in services().items() if is_demo(service)}
    assert set(demos) == {"demo", "demo-llm", "demo-llm-gpu", "demo-asr", "demo-replica"}
    for name, service in demos.items():
        assert f"http://127.0.0.1:{DEMO_PORT}/healthz" in " ".join(service["healthcheck"]["test"])
        assert service["environment"]["DUPLEX_PORT"] == str(DEMO_PORT), name


def test_each_demo_variant_is_wired_to_its_own_healthy_server() -> None:
    all_services = services()
    wiring = {"demo-llm": ("DUPLEX_LLM_URL", "llm", "/v1"),
              "demo-llm-gpu": ("DUPLEX_LLM_URL", "llm-gpu", "/v1"),
              "demo-asr": ("DUPLEX_ASR_URL", "asr", "/v1/audio/transcriptions")}
    for demo, (variable, server, path) in wiring.items():
        service = all_services[demo]
        url = urlsplit(service["environment"][variable])
        assert (url.hostname, url.path) == (server, path), demo
        assert service["profiles"] == all_services[server]["profiles"], demo
        assert service["depends_on"] == {server: {"condition": "service_healthy"}}, demo
        health_url = next(part for part in all_services[server]["healthcheck"]["test"]
                          if "http://" in part)
        assert f":{url.port}/" in health_url, (demo, health_url)
    assert all_services["demo-llm"]["environment"]["DUPLEX_LLM_MODEL"] == (
        all_services["llm"]["environment"]["LLAMA_ARG_ALIAS"])
    assert all_services["llm"]["environment"]["LLAMA_ARG_PORT"] == "8080"


def test_the_plain_demo_passes_optional_settings_only_when_set() -> None:
    environment = services()["demo"]["environment"]
    for variable in (*LLM_ENV, "DUPLEX_ASR_URL", "DUPLEX_ASR_MODEL"):
        assert variable in environment and environment[variable] is None, variable


def test_every_demo_variable_is_a_flag_of_the_server() -> None:
    flags = {action.dest.upper() for action in build_parser({})._actions}
    for name, service in services().items():
        if not is_demo(service):
            continue
        for variable in service["environment"]:
            assert variable.startswith("DUPLEX_"), (name, variable)
            if variable not in LLM_ENV:
                assert variable.removeprefix("DUPLEX_") in flags, (name, variable)


def test_published_ports_are_local_and_distinct() -> None:
    published = [port for service in services().values() for port in service.get("ports", [])]
    assert all(port.startswith("127.0.0.1:") for port in published)
    host_ports = [port.split(":")[1] for port in published]
    assert len(host_ports) == len(set(host_ports))
    assert "127.0.0.1:8765:8765" in services()["demo"]["ports"]


def test_the_scale_proxy_routes_websockets_to_the_replicas_by_a_sticky_cookie() -> None:
    all_services = services()
    proxy, replicas = all_services["proxy"], all_services["demo-replica"]
    assert "ports" not in replicas
    assert replicas["deploy"]["replicas"] == "${DEMO_REPLICAS:-3}"
    assert proxy["depends_on"] == {"demo-replica": {"condition": "service_healthy"}}
    (mount,) = proxy["volumes"]
    source, target, mode = mount.split(":")
    assert (ROOT / source).resolve() == NGINX and mode == "ro"
    assert target.startswith("/etc/nginx/conf.d/")
    conf = re.sub(r"#.*", "", NGINX.read_text(encoding="utf-8"))
    upstream = re.search(r"upstream (\w+) \{(.*?)\}", conf, flags=re.DOTALL)
    assert upstream is not None
    assert re.search(rf"server demo-replica:{DEMO_PORT};", upstream.group(2))
    assert "hash $route_key consistent;" in upstream.group(2)
    assert "$cookie_duplex_route" in conf and "add_header Set-Cookie $route_cookie" in conf
    assert f"proxy_pass http://{upstream.group(1)};" in conf
    for directive in ("proxy_http_version 1.1;", "proxy_set_header Upgrade $http_upgrade;",
                      "proxy_set_header Connection $connection_upgrade;",
                      "proxy_set_header Host $http_host;"):
        assert directive in conf, directive
    listen = re.search(r"listen (\d+);", conf)
    assert listen is not None and proxy["ports"] == [f"127.0.0.1:8780:{listen.group(1)}"]


async def test_the_documented_openai_sdk_recipe_holds_a_conversation(start_server) -> None:
    clients = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    recipe = clients[clients.index("## The `openai` SDK"):]
    code = re.search(r"```python\n(.*?)```", recipe, flags=re.DOTALL).group(1)
    server = await start_server(tts="uniform", lead_ms=600_000)
    code = code.replace("ws://127.0.0.1:8765/v1", server.ws_url.removesuffix("/realtime"))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(120):
        stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    assert "tide" in stdout.decode().lower()


def test_the_image_checks_its_health_like_the_compose_file() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    healthcheck = re.search(r"^HEALTHCHECK .*?CMD (\[.*?\])$", dockerfile,
                            flags=re.MULTILINE | re.DOTALL)
    assert healthcheck is not None
    assert yaml.safe_load(healthcheck.group(1)) == services()["demo"]["healthcheck"]["test"][1:]
