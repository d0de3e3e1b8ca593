"""Checks of deploy/ that need neither Docker nor a cluster (neither exists on this machine).

- The image: every COPY source exists in the build context and survives deploy/Dockerfile.dockerignore; the
  runtime contract (pinned base, non-root uid, healthcheck, entry point, writable multiprocess metrics dir).
- The compose stack: pinned images or a local build, bind mounts that exist, the rules it mounts load, and
  Prometheus and Grafana wired to the right services and paths.
- Kubernetes: every manifest validates offline against the Kubernetes schemas (kubernetes-validate, strict,
  oldest and newest supported version); CRDs it cannot know are named with a reason and checked separately;
  the objects are cross-checked (probes, drain timing, selectors, mounts, secrets).
- The dashboard: every query names metrics and labels that proxy/metrics.py really exports, and the metrics
  module matches the contract in the briefs' metrics list.
"""

from __future__ import annotations

import re
import socket
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import json5
import jsonschema
import kubernetes_validate
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase
from toolshim.config.loading import load_rules
from toolshim.config.settings import ENV_VARS as SETTINGS_ENV  # the setting -> variable table
from toolshim.config.settings import load_settings
from toolshim.observe.metrics import Metrics

from tests.deploy.contracts import CONTRACT, NOT_IN_K8S_SCHEMAS, SERVICEMONITOR_SCHEMA
from tests.deploy.files import (
    DASHBOARD,
    DEPLOY,
    DOCKERFILE,
    IGNORE_FILE,
    K8S,
    ROOT,
    compose,
    compose_mounts,
    container,
    dashboard,
    dockerfile_env,
    k8s_documents,
    k8s_object,
    panels,
    seconds,
    yaml_file,
)
from tests.deploy.parsing import (
    IgnoreRules,
    context_files,
    copies,
    exec_form,
    label_values_names,
    parse_dockerfile,
    promql_names,
    run_mounts,
)

K8S_VERSIONS = ("1.29", kubernetes_validate.latest_version())  # oldest we promise, newest the validator knows
PINNED_TAG = re.compile(r"^v?\d+(\.\d+)+([.-][\w.]+)?$")
TARGET_LABELS = frozenset({"job", "instance"})  # added by Prometheus to every scraped series


@pytest.fixture(scope="module")
def exported() -> dict[str, tuple[str, frozenset[str]]]:
    """Sample name -> (type, labels) of every series a single-process toolshim exports."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
        patch.delenv("prometheus_multiproc_dir", raising=False)
        metrics = Metrics(CollectorRegistry())
    collectors = [c for c in vars(metrics).values() if isinstance(c, MetricWrapperBase)]
    labels_of = {c._name: frozenset(c._labelnames) for c in collectors}  # no public accessor in prometheus_client
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
    result: dict[str, tuple[str, frozenset[str]]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            result[sample.name] = (family.type, frozenset(sample.labels))
        if family.name in labels_of:
            for suffix in suffixes[family.type]:
                extra = {"le"} if suffix == "_bucket" else set()
                result[family.name + suffix] = (family.type, labels_of[family.name] | extra)
    return result


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any attempt to open a connection: the checks must work offline."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


# ---------------------------------------------------------------- helpers' own checks


def test_ignore_rules_follow_docker_semantics() -> None:
    rules = IgnoreRules.parse("# c\n*\n!proxy/\n!README.md\n**/__pycache__\n**/*.py[co]\n")
    assert rules.excluded(".venv/bin/python")
    assert rules.excluded(".env")
    assert not rules.excluded("proxy/formats/hermes.py")
    assert rules.excluded("proxy/formats/__pycache__/hermes.cpython-311.pyc")
    assert rules.excluded("proxy/x.pyc")
    assert not rules.excluded("README.md")
    assert rules.excluded("docs/README.md")  # `*` does not cross "/", but it matches the parent "docs"


def test_promql_names_finds_metrics_and_labels() -> None:
    expr = (
        "histogram_quantile(0.95, sum by (le, model) (rate(toolshim_request_duration_seconds_bucket"
        '{job=~"$job",model=~"$model"}[$__rate_interval]))) / on(model) group_left sum(up{a!="x y"})'
    )
    metrics, labels = promql_names(expr)
    assert metrics == {"toolshim_request_duration_seconds_bucket", "up"}
    assert labels == {"le", "model", "job", "a"}
    assert label_values_names('label_values(toolshim_requests_total{job=~"$job"}, model)') == (
        {"toolshim_requests_total"},
        {"job", "model"},
    )


# ---------------------------------------------------------------- Dockerfile


def test_dockerfile_copies_come_from_the_context() -> None:
    parsed = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    rules = IgnoreRules.parse(IGNORE_FILE.read_text(encoding="utf-8"))
    problems = []
    for copy in copies(parsed):
        if copy.from_stage is not None:
            if copy.from_stage not in parsed.stages:
                problems.append(f"COPY --from={copy.from_stage}: no such stage")
            continue
        for source in copy.sources:
            if not list(ROOT.glob(source)):
                problems.append(f"COPY {source}: not in the build context ({ROOT})")
                continue
            sent = set(context_files(ROOT, source, rules))
            matched = [m for top in ROOT.glob(source) for m in (top, *top.rglob("*.py"))]
            wanted = [m.relative_to(ROOT).as_posix() for m in matched if m.is_file()]
            lost = sorted(set(wanted) - sent)
            if not sent or lost:
                problems.append(f"COPY {source}: {IGNORE_FILE.name} keeps out {lost or 'everything'}")
    for mount in run_mounts(parsed):
        if "from" in mount and mount["from"] not in parsed.stages:
            problems.append(f"RUN --mount from={mount['from']}: no such stage")
    assert not problems, "\n".join(problems)


def test_dockerfile_builder_gets_what_the_build_backend_reads() -> None:
    """setuptools reads pyproject.toml, the readme and license files it names and the package folders: all must be
    copied."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_dirs = project["tool"]["setuptools"]["package-dir"]
    packages = {package_dirs.get(name, name) for name in project["tool"]["setuptools"]["packages"] if "." not in name}
    parsed = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    builder = parsed.stages[0]
    copied = {s.rstrip("/") for c in copies(parsed) if c.stage == builder and c.from_stage is None for s in c.sources}
    needed = {"pyproject.toml", project["project"]["readme"], *project["project"]["license-files"], *packages}
    assert needed <= copied, f"the builder stage does not copy {sorted(needed - copied)}"


def test_dockerfile_builder_gets_what_package_symlinks_point_at() -> None:
    """A symlink in a package folder (proxy/config/default_rules.json5) is copied as a link: copy its target too."""
    parsed = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    builder = parsed.stages[0]
    copied = [s.rstrip("/") for c in copies(parsed) if c.stage == builder and c.from_stage is None for s in c.sources]
    links = [p for source in copied for p in (ROOT / source).rglob("*") if p.is_symlink()]
    assert links, "proxy/config/default_rules.json5 is expected to be a symlink into rules/"
    for link in links:
        target = link.resolve().relative_to(ROOT).as_posix()
        covered = [s for s in copied if target == s or target.startswith(f"{s}/")]
        assert covered, f"{link.relative_to(ROOT)} points at {target}, which the builder stage does not copy"


def test_dockerfile_runtime_contract() -> None:
    parsed = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    assert len(parsed.stages) >= 2, "multi-stage: a builder and a runtime"
    for ins in parsed.of("FROM"):
        image = parsed.expand(ins.args.split()[0], None)
        name, _, tag = image.partition(":")
        assert tag and tag != "latest", f"FROM {image}: pin a tag"
        assert name in ("python", "docker.io/library/python") and tag.startswith("3.11") and "slim" in tag, image
    runtime = parsed.stages[-1]
    assert any(m.get("from") == parsed.stages[0] for m in run_mounts(parsed)) or any(
        c.from_stage == parsed.stages[0] and c.stage == runtime for c in copies(parsed)
    ), "the runtime stage must install what the builder built"
    user = parsed.of("USER")[-1].args.split(":")[0]
    assert user.isdigit() and int(user) != 0, f"USER {user}: a numeric non-root uid (runAsNonRoot checks it)"
    assert "8000" in parsed.of("EXPOSE")[-1].args.split()
    health = parsed.of("HEALTHCHECK")[-1].args
    assert "/healthz" in health and "urllib" in health and "curl" not in health
    entry = exec_form(parsed.of("ENTRYPOINT")[-1].args) or []
    cmd = exec_form(parsed.of("CMD")[-1].args) or []
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert entry[:1] == ["toolshim"] and "toolshim" in project["project"]["scripts"]
    assert (entry + cmd)[1:2] == ["serve"], "the image runs `toolshim serve` by default"
    metrics_dir = dockerfile_env()["PROMETHEUS_MULTIPROC_DIR"]
    created = [i.args for i in parsed.of("RUN") if i.stage == runtime and metrics_dir in i.args]
    assert created and user in created[0], f"{metrics_dir} must be created and owned by uid {user}"


# ---------------------------------------------------------------- settings in every deployment


def test_environment_names_and_values_are_settings_toolshim_knows() -> None:
    known = set(SETTINGS_ENV.values())
    secret_keys = set(k8s_object("Secret")["stringData"])
    sources = {
        "Dockerfile": dockerfile_env(),
        "compose": {k: str(v) for k, v in compose()["services"]["toolshim"]["environment"].items()},
        "deployment": {e["name"]: e["value"] for e in container()["env"] if "value" in e},
        "secret.example": {k: v for k, v in k8s_object("Secret")["stringData"].items() if k.startswith("TOOLSHIM_")},
    }
    for where, env in sources.items():
        unknown = {k for k in env if k.startswith("TOOLSHIM_")} - known
        assert not unknown, f"{where}: {sorted(unknown)} are not toolshim settings"
        resolved = {k: v for k, v in env.items() if "${" not in v}  # compose interpolation is left to compose
        load_settings(env=resolved)  # raises on a bad value (e.g. a non-numeric port)
    assert {"TOOLSHIM_API_KEYS", "TOOLSHIM_ADMIN_KEY"} <= secret_keys, "secrets belong in the Secret"
    assert dockerfile_env()["TOOLSHIM_HOST"] == "0.0.0.0", "a container must listen on all interfaces"


# ---------------------------------------------------------------- compose


def test_compose_services_use_pinned_images_or_the_local_build() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            build = service["build"]
            context = (DEPLOY / build["context"]).resolve()
            assert (context / build["dockerfile"]).resolve() == DOCKERFILE.resolve(), name
            assert (DOCKERFILE.parent / f"{DOCKERFILE.name}.dockerignore").exists()
        image = service.get("image", "")
        assert image or "build" in service, f"{name}: needs an image or a build"
        if image:
            reference, _, digest = image.partition("@")
            tag = reference.rpartition(":")[2] if ":" in reference.rpartition("/")[2] else ""
            assert digest or PINNED_TAG.match(tag), f"{name}: {image} is not pinned to a version"


def test_compose_mounts_exist_and_named_volumes_are_declared() -> None:
    spec = compose()
    for name, service in spec["services"].items():
        for target, source in compose_mounts(service).items():
            if source.startswith((".", "/")):
                assert (DEPLOY / source).exists(), f"{name}: mount source {source} for {target} does not exist"
            else:
                assert source in spec.get("volumes", {}), f"{name}: named volume {source} is not declared"


def test_compose_toolshim_serves_the_compose_rules_from_ollama() -> None:
    spec = compose()
    toolshim = spec["services"]["toolshim"]
    env = toolshim["environment"]
    source = compose_mounts(toolshim)[env["TOOLSHIM_RULES"]]
    rules_path = DEPLOY / source
    json5.loads(rules_path.read_text(encoding="utf-8"))
    rules = load_rules(rules_path)
    for upstream in rules.upstreams.values():
        url = urlsplit(upstream.base_url or "")
        assert url.hostname in spec["services"], f"{url.hostname}: not a compose service"
        assert upstream.api_key_env is None or upstream.api_key_env in env, f"{upstream.api_key_env} is not passed"
    assert "ollama" in spec["services"] and spec["services"]["ollama"]["image"].startswith("ollama/ollama:")
    assert any(p.endswith(f":{env.get('TOOLSHIM_PORT', '8000')}") for p in toolshim["ports"])
    drain = float(env.get("TOOLSHIM_DRAIN_SECONDS", dockerfile_env()["TOOLSHIM_DRAIN_SECONDS"]))
    assert seconds(toolshim["stop_grace_period"]) > drain, "compose must wait longer than the drain"


def test_prometheus_scrapes_toolshim() -> None:
    spec = compose()
    prometheus = spec["services"]["prometheus"]
    config_path = next(arg.split("=", 1)[1] for arg in prometheus["command"] if arg.startswith("--config.file="))
    config = yaml_file(DEPLOY / compose_mounts(prometheus)[config_path])
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "toolshim")
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets = [t for group in job["static_configs"] for t in group["targets"]]
    port = spec["services"]["toolshim"]["environment"].get("TOOLSHIM_PORT", "8000")
    assert f"toolshim:{port}" in targets


def test_grafana_provisioning_matches_compose_mounts() -> None:
    spec = compose()
    grafana = spec["services"]["grafana"]
    mounts = compose_mounts(grafana)
    provisioning = DEPLOY / mounts["/etc/grafana/provisioning"]  # Grafana's default GF_PATHS_PROVISIONING
    sources = sorted((provisioning / "datasources").glob("*.yaml"))
    datasources = [d for f in sources for d in yaml_file(f)["datasources"]]
    prometheus = next(d for d in datasources if d["type"] == "prometheus")
    url = urlsplit(prometheus["url"])
    assert url.hostname in spec["services"] and url.port == 9090
    providers = [p for f in sorted((provisioning / "dashboards").glob("*.yaml")) for p in yaml_file(f)["providers"]]
    assert providers, "no dashboard provider"
    for provider in providers:
        path = provider["options"]["path"]
        assert path in mounts, f"provider {provider['name']}: {path} is not mounted into grafana"
        assert (DEPLOY / mounts[path] / DASHBOARD.name).samefile(DASHBOARD)
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    folder, _, file = home.rpartition("/")
    assert (DEPLOY / mounts[folder] / file).samefile(DASHBOARD)


# ---------------------------------------------------------------- Kubernetes


@pytest.mark.parametrize(("where", "doc"), k8s_documents(), ids=[w for w, _ in k8s_documents()])
def test_k8s_manifest_validates_against_the_kubernetes_schemas(
    where: str, doc: dict[str, Any], no_network: None
) -> None:
    reason = NOT_IN_K8S_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    if reason:
        pytest.skip(reason)
    errors = []
    for version in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:  # its repr carries the whole schema: keep the message
            errors.append(f"{where} against Kubernetes {version}: {'.'.join(map(str, exc.path))}: {exc.message}")
    assert not errors, "\n".join(errors)


def test_strict_validation_rejects_unknown_fields(no_network: None) -> None:
    deployment = k8s_object("Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 3}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)


def test_servicemonitor_has_the_crd_shape_and_targets_the_service() -> None:
    monitor, service = k8s_object("ServiceMonitor"), k8s_object("Service")
    jsonschema.validate(monitor, SERVICEMONITOR_SCHEMA)
    typo = {**monitor, "spec": {**monitor["spec"], "endpoints": [{"port": "http", "intervall": "15s"}]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(typo, SERVICEMONITOR_SCHEMA)
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    port_names = {p["name"] for p in service["spec"]["ports"]}
    assert all(e["port"] in port_names for e in monitor["spec"]["endpoints"])
    assert all(e.get("path", "/metrics") == "/metrics" for e in monitor["spec"]["endpoints"])


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml_file(K8S / "kustomization.yaml")
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    examples = {name for name in on_disk if ".example." in name}  # never applied: placeholders only
    assert listed == on_disk - examples, f"unlisted: {on_disk - examples - listed}, missing: {listed - on_disk}"
    image = container()["image"].rsplit(":", 1)[0]
    assert image in {i["name"] for i in kustomization.get("images", [])}, "kustomize must be able to set the image"


def test_deployment_probes_and_drain_fit_the_grace_period() -> None:
    pod = k8s_object("Deployment")["spec"]["template"]["spec"]
    app = container()
    ports = {p["name"]: p["containerPort"] for p in app["ports"]}
    assert ports.get("http") == int(dockerfile_env()["TOOLSHIM_PORT"])
    assert app["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert app["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    pre_stop = app["lifecycle"]["preStop"]
    pause = pre_stop["sleep"]["seconds"] if "sleep" in pre_stop else float(pre_stop["exec"]["command"][-1])
    env = {e["name"]: e.get("value") for e in app["env"]}
    drain = float(env.get("TOOLSHIM_DRAIN_SECONDS") or dockerfile_env()["TOOLSHIM_DRAIN_SECONDS"])
    assert pod["terminationGracePeriodSeconds"] > pause + drain, "SIGKILL would cut the drain short"
    assert app["resources"]["requests"].keys() >= {"cpu", "memory"}, "the HPA's CPU target needs a CPU request"
    assert "memory" in app["resources"]["limits"]


def test_deployment_mounts_rules_and_a_writable_metrics_dir() -> None:
    pod = k8s_object("Deployment")["spec"]["template"]["spec"]
    app = container()
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in app["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in app["env"]}
    rules_mount = mounts[env["TOOLSHIM_RULES"]]
    assert "subPath" not in rules_mount, "subPath mounts never see ConfigMap updates"
    assert volumes[rules_mount["name"]]["configMap"]["name"] == k8s_object("ConfigMap")["metadata"]["name"]
    metrics_mount = mounts[env["PROMETHEUS_MULTIPROC_DIR"]]
    assert "emptyDir" in volumes[metrics_mount["name"]], "multiprocess files must start empty in every pod"
    secret = k8s_object("Secret")["metadata"]["name"]
    assert {"secretRef": {"name": secret}} in app["envFrom"]


def test_deployment_security_matches_the_image() -> None:
    pod = k8s_object("Deployment")["spec"]["template"]["spec"]
    app = container()
    uid = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8")).of("USER")[-1].args.split(":")[0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert str(pod["securityContext"]["runAsUser"]) == uid
    assert app["securityContext"]["readOnlyRootFilesystem"] is True
    assert app["securityContext"]["allowPrivilegeEscalation"] is False
    assert app["securityContext"]["capabilities"]["drop"] == ["ALL"]
    writable = {m["mountPath"] for m in app["volumeMounts"] if not m.get("readOnly")}
    assert dockerfile_env()["PROMETHEUS_MULTIPROC_DIR"] in writable


def test_service_hpa_and_pdb_target_the_deployment_pods() -> None:
    deployment = k8s_object("Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
    service = k8s_object("Service")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    port_names = {p["name"] for p in container()["ports"]}
    assert all(p["targetPort"] in port_names for p in service["spec"]["ports"])
    hpa = k8s_object("HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert any(m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"])
    pdb = k8s_object("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    allowed = hpa["spec"]["minReplicas"] - pdb["spec"].get("minAvailable", 0)
    if "maxUnavailable" in pdb["spec"]:
        allowed = min(allowed, pdb["spec"]["maxUnavailable"])
    assert allowed >= 1, "at minReplicas the budget must still allow a node drain"


def test_k8s_rules_load_and_the_secret_carries_their_keys(tmp_path: Path) -> None:
    configmap = k8s_object("ConfigMap")
    for key, text in configmap["data"].items():
        (tmp_path / key).write_text(text, encoding="utf-8")
    rules = load_rules(tmp_path)  # the folder, as TOOLSHIM_RULES names the mounted folder
    secret_keys = set(k8s_object("Secret")["stringData"])
    needed = {u.api_key_env for u in rules.upstreams.values() if u.api_key_env}
    assert needed <= secret_keys, f"secret.example.yaml lacks {sorted(needed - secret_keys)}"


# ---------------------------------------------------------------- Grafana dashboard


def test_dashboard_is_importable_with_a_datasource_variable() -> None:
    board = dashboard()
    assert board["uid"] == "toolshim" and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels(board):
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", f"{panel['title']}: hard-wired datasource"
            assert panel["targets"], f"{panel['title']}: no query"


def test_dashboard_queries_use_exported_metrics_and_labels(exported: dict[str, tuple[str, frozenset[str]]]) -> None:
    board = dashboard()
    queries = [(p["title"], t["expr"], promql_names(t["expr"])) for p in panels(board) for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            queries.append((f"${variable['name']}", query, label_values_names(query)))
    problems = []
    for title, expr, (metrics, labels) in queries:
        unknown = metrics - exported.keys()
        allowed = TARGET_LABELS.union(*(exported[m][1] for m in metrics & exported.keys()))
        if unknown or not metrics or labels - allowed:
            problems.append(f"{title}: {expr}\n  unknown metrics {sorted(unknown)}, labels {sorted(labels - allowed)}")
    assert not problems, "\n".join(problems)


def test_dashboard_covers_every_toolshim_metric(exported: dict[str, tuple[str, frozenset[str]]]) -> None:
    exprs = " ".join(t["expr"] for p in panels(dashboard()) for t in p.get("targets", []))
    used = {m for p in panels(dashboard()) for t in p.get("targets", []) for m in promql_names(t["expr"])[0]}
    families = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in exported if name.startswith("toolshim_")}
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in used}
    assert families <= shown, f"no panel for {sorted(families - shown)}"
    for histogram in ("toolshim_request_duration_seconds", "toolshim_time_to_first_token_seconds"):
        assert f"histogram_quantile(0.95, sum by (le) (rate({histogram}_bucket" in exprs, histogram


def test_metrics_module_matches_the_contract(exported: dict[str, tuple[str, frozenset[str]]]) -> None:
    ours = {name: spec for name, spec in exported.items() if name.startswith("toolshim_")}
    for name, (kind, labels) in CONTRACT.items():
        base = name.removesuffix("_total")
        sample = name if kind != "histogram" else f"{base}_count"
        assert sample in ours, f"{name}: not exported by proxy/metrics.py"
        assert ours[sample] == (kind, labels), f"{name}: exported as {ours[sample]}, contract says {(kind, labels)}"
    contract_families = {n.removesuffix("_total") for n in CONTRACT}
    extra = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in ours} - contract_families
    assert not extra, f"metrics missing from the contract (/work/briefs/metrics.md): {sorted(extra)}"
