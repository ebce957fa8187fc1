#!/usr/bin/env bash
# deploy/systemd for real: a Debian bookworm root filesystem with systemd and the runtime
# packages (deploy/docker/runtime-packages) is booted with `systemd-nspawn --boot`; inside,
# a oneshot unit follows deploy/README.md's systemd steps (sysusers, /etc/tessera, the env
# file, the units as shipped), enables tessera-coordinator and tessera-worker@{1,2}, submits
# a job over CURVE from a client key, then stops a worker (the drain) and the coordinator.
# Checks: every input rendered once, outputs owned by the tessera user, both services ran
# as tessera with their hardening on, and each stop ended in Result=success. Needs root,
# mmdebstrap and systemd-nspawn (systemd-container); skipped with the reason otherwise.
#
#   scripts/test-systemd.sh [BINARY]     BINARY: a --static-swift-stdlib build (default:
#                                        .build-static/release/tessera, built when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
skip() { echo "systemd test: skipped ($1)"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "needs root: mmdebstrap and systemd-nspawn"
command -v mmdebstrap >/dev/null || skip "mmdebstrap is not installed (apt-get install mmdebstrap)"
command -v systemd-nspawn >/dev/null || skip "systemd-nspawn is not installed (apt-get install systemd-container)"
binary=${1:-.build-static/release/tessera}
if [ ! -x "$binary" ]; then
    swift build -c release --static-swift-stdlib --product tessera --scratch-path .build-static >&2
fi
binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"

work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
rootfs="$work/rootfs"
packages=$(grep -v '^\s*\(#\|$\)' deploy/docker/runtime-packages | paste -sd, -)
mmdebstrap --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='APT::Install-Recommends "false"' --include="systemd,systemd-sysv,dbus,$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$rootfs" http://deb.debian.org/debian > "$work/mmdebstrap.log" 2>&1 \
    || { tail -20 "$work/mmdebstrap.log" >&2; echo "systemd test: mmdebstrap failed" >&2; exit 1; }

# The driver: deploy/README.md's steps, as an administrator types them, then the job and
# the stops. It writes what it saw to /result and powers the container off.
cat > "$rootfs/usr/local/sbin/tessera-systemd-test" <<'EOF'
#!/bin/bash
set -uo pipefail
exec > /result/log.txt 2>&1
set -x
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
fact() { echo "$1=$2" >> /result/facts; }
cd /src
install -m 0755 /bin/tessera-under-test /usr/local/bin/tessera
install -D -m 0644 deploy/systemd/tessera.sysusers.conf /etc/sysusers.d/tessera.conf && systemd-sysusers
install -d -m 0750 -o root -g tessera /etc/tessera /etc/tessera/keys /etc/tessera/allow
install -m 0640 -g tessera deploy/systemd/tessera.env.example /etc/tessera/tessera.env
# One host: the workers connect over loopback; metrics on loopback only.
sed -i -e 's|^TESSERA_COORDINATOR=.*|TESSERA_COORDINATOR=tcp://127.0.0.1:5555|' \
       -e 's|^TESSERA_METRICS_ADDRESS=.*|TESSERA_METRICS_ADDRESS=127.0.0.1|' \
       -e 's|^TESSERA_ALLOW_READ=.*|TESSERA_ALLOW_READ=/srv|' \
       -e 's|^TESSERA_ALLOW_WRITE=.*|TESSERA_ALLOW_WRITE=/var/lib/tessera|' /etc/tessera/tessera.env
cp deploy/systemd/*.service /etc/systemd/system/ && systemctl daemon-reload
# Keys: the coordinator's and this host's worker pair (owner tessera, 0600), a client pair
# for root; the public keys of workers and clients in allow/.
(cd /etc/tessera/keys && tessera keygen coordinator && tessera keygen worker \
    && chown tessera:tessera coordinator.secret worker.secret && chmod 0600 ./*.secret && chmod 0644 ./*.pub)
install -d -m 0750 -o root -g tessera /etc/tessera/allow/workers /etc/tessera/allow/clients
install -m 0644 /etc/tessera/keys/worker.pub /etc/tessera/allow/workers/
install -d -m 0700 /root/keys && (cd /root/keys && tessera keygen client)
install -m 0644 /root/keys/client.pub /etc/tessera/allow/clients/

start=$(now)
systemctl enable --now tessera-coordinator
systemctl enable --now tessera-worker@1 tessera-worker@2
cat > /root/job.yaml <<'JOB'
name: systemd
inputs:
  - /srv/images
output: /var/lib/tessera/out
outputs:
  - preset: widget
    path: "{dir}/{stem}.{ext}"
JOB
submitted=$(now)
tessera submit /root/job.yaml --wait --json --timeout 60 --curve-secret /root/keys/client.secret \
    --server-key /etc/tessera/keys/coordinator.pub > /result/submit.json
fact submit_exit $?
fact job_seconds "$(since "$submitted")"
fact since_enable_seconds "$(since "$start")"
fact outputs "$(find /var/lib/tessera/out -type f | wc -l)"
fact output_owners "$(find /var/lib/tessera/out -type f -printf '%u\n' | sort -u | paste -sd, -)"
for u in tessera-coordinator tessera-worker@1 tessera-worker@2; do
    pid=$(systemctl show -P MainPID "$u")
    fact "$u.state" "$(systemctl is-active "$u")"
    fact "$u.user" "$(stat -c %U "/proc/$pid")"
    fact "$u.nonewprivs" "$(awk '/^NoNewPrivs/ {print $2}' "/proc/$pid/status")"
    fact "$u.capeff" "$(awk '/^CapEff/ {print $2}' "/proc/$pid/status")"
    fact "$u.seccomp" "$(awk '/^Seccomp:/ {print $2}' "/proc/$pid/status")"
done
# Stop = drain, in the middle of a larger job: worker 1's running tasks finish, the rest go
# to worker 2, none is lost or done twice.
keys=(--curve-secret /root/keys/client.secret --server-key /etc/tessera/keys/coordinator.pub)
mkdir -p /srv/many
for i in $(seq 1 20); do
    find /srv/images -type f \( -iname '*.jpg' -o -iname '*.png' -o -iname '*.heic' -o -iname '*.avif' -o -iname '*.webp' \) \
        -exec sh -c 'cp "$1" "/srv/many/$2-$(basename "$1")"' _ {} "$i" \;
done
sed -e 's|/srv/images|/srv/many|' -e 's|/var/lib/tessera/out|/var/lib/tessera/many|' -e 's|name: systemd|name: many|' \
    /root/job.yaml > /root/many.yaml
job=$(tessera submit /root/many.yaml --json "${keys[@]}" | sed -n 's/.*"job":"\([^"]*\)".*/\1/p')
succeeded=0
for _ in $(seq 1 300); do
    succeeded=$(tessera status "$job" --json "${keys[@]}" | sed -n 's/.*"succeeded":\([0-9]*\).*/\1/p')
    [ "${succeeded:-0}" -ge 10 ] && break
    sleep 0.05
done
fact drain_after_succeeded "$succeeded"
t=$(now)
systemctl stop tessera-worker@1
fact tessera-worker@1.stop_seconds "$(since "$t")"
fact tessera-worker@1.result "$(systemctl show -P Result tessera-worker@1)"
fact tessera-worker@1.exit "$(systemctl show -P ExecMainStatus tessera-worker@1)"
tessera wait "$job" --json "${keys[@]}" > /result/many.json
fact many_wait_exit $?
fact many_inputs "$(find /srv/many -type f | wc -l)"
fact many_outputs "$(find /var/lib/tessera/many -type f | wc -l)"
# Tasks per worker in that job, from its records (each names its worker), and tasks done twice.
tessera results "$job" "${keys[@]}" > /result/many.jsonl
fact many_per_worker "$(sed -n 's/.*"worker":"\([^"]*\)".*/\1/p' /result/many.jsonl | sort | uniq -c | awk '{print $1}' | paste -sd+ -)"
fact many_records "$(wc -l < /result/many.jsonl)"
fact many_distinct_inputs "$(sed -n 's/.*"input":"\([^"]*\)".*/\1/p' /result/many.jsonl | sort -u | wc -l)"
# The other stops.
for u in tessera-worker@2 tessera-coordinator; do
    t=$(now)
    systemctl stop "$u"
    fact "$u.stop_seconds" "$(since "$t")"
    fact "$u.result" "$(systemctl show -P Result "$u")"
    fact "$u.exit" "$(systemctl show -P ExecMainStatus "$u")"
done
journalctl --no-pager -o cat -u 'tessera-*' > /result/journal.txt
# The journal is consistent after the stop: the coordinator starts again on it and knows the job.
systemctl start tessera-coordinator && sleep 1
tessera status --json --curve-secret /root/keys/client.secret --server-key /etc/tessera/keys/coordinator.pub \
    > /result/status.json
fact status_exit $?
systemctl stop tessera-coordinator
fact done 1
systemctl poweroff --no-block
EOF
chmod 0755 "$rootfs/usr/local/sbin/tessera-systemd-test"
cat > "$rootfs/etc/systemd/system/tessera-systemd-test.service" <<'EOF'
[Unit]
Description=Tessera systemd test driver
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/tessera-systemd-test
TimeoutStartSec=600
[Install]
WantedBy=multi-user.target
EOF
ln -s /etc/systemd/system/tessera-systemd-test.service "$rootfs/etc/systemd/system/multi-user.target.wants/"

mkdir -p "$work/result"
images="$PWD/examples/images"
inputs=$(find "$images" -type f \( -iname '*.jpg' -o -iname '*.png' -o -iname '*.heic' -o -iname '*.avif' -o -iname '*.webp' \) | wc -l)
booted=$(date +%s.%N)
# In the background and waited for, so that Ctrl-C (or SIGTERM) reaches this script at once:
# it stops the container (nspawn powers it off on SIGTERM) and ends the test with 130.
status=0
timeout 900 systemd-nspawn --boot --register=no --keep-unit --quiet -D "$rootfs" \
    --bind-ro="$PWD:/src" --bind-ro="$binary:/bin/tessera-under-test" --bind-ro="$images:/srv/images" \
    --bind="$work/result:/result" > "$work/console.log" 2>&1 &
nspawn=$!
trap 'kill -TERM "$nspawn" 2>/dev/null; wait "$nspawn"; echo "systemd test: interrupted" >&2; exit 130' INT TERM
wait "$nspawn" || status=$?
trap - INT TERM
[ "$status" -ne 124 ] || { tail -30 "$work/console.log"; echo "systemd test: the container ran for 900 s" >&2; exit 1; }
seconds=$(awk -v a="$booted" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')

fail() {
    echo "--- driver log"; tail -40 "$work/result/log.txt" 2>/dev/null
    echo "--- journal"; tail -40 "$work/result/journal.txt" 2>/dev/null
    echo "--- facts"; cat "$work/result/facts" 2>/dev/null
    echo "systemd test: $1" >&2; exit 1
}
[ -f "$work/result/facts" ] || { tail -30 "$work/console.log"; fail "the driver did not run (console above)"; }
declare -A f
while IFS='=' read -r k v; do f[$k]=$v; done < "$work/result/facts"
[ "${f[done]:-}" = 1 ] || fail "the driver did not finish"
[ "${f[submit_exit]}" = 0 ] || fail "tessera submit --wait exited ${f[submit_exit]}"
[ "${f[outputs]}" = "$inputs" ] || fail "${f[outputs]} outputs for $inputs inputs"
[ "${f[output_owners]}" = tessera ] || fail "outputs owned by ${f[output_owners]}"
for u in tessera-coordinator tessera-worker@1 tessera-worker@2; do
    [ "${f[$u.state]}" = active ] || fail "$u was ${f[$u.state]}"
    [ "${f[$u.user]}" = tessera ] || fail "$u ran as ${f[$u.user]}"
    if ! { [ "${f[$u.nonewprivs]}" = 1 ] && [ "${f[$u.capeff]}" = 0000000000000000 ] && [ "${f[$u.seccomp]}" = 2 ]; }; then
        fail "$u hardening: NoNewPrivs ${f[$u.nonewprivs]}, CapEff ${f[$u.capeff]}, Seccomp ${f[$u.seccomp]}"
    fi
    if ! { [ "${f[$u.result]}" = success ] && [ "${f[$u.exit]}" = 0 ]; }; then
        fail "$u stopped with ${f[$u.result]}, exit ${f[$u.exit]}"
    fi
done
if ! { [ "${f[status_exit]}" = 0 ] && grep -q '"name":"many"' "$work/result/status.json"; }; then
    fail "the restarted coordinator does not know the job"
fi
grep -Eq '"failed" ?: ?0[,}]' "$work/result/submit.json" || fail "tasks failed: $(tail -1 "$work/result/submit.json")"
# The job during which worker 1 was stopped: every task done once, by the two workers together.
if ! { [ "${f[many_wait_exit]}" = 0 ] && grep -Eq '"failed" ?: ?0[,}]' "$work/result/many.json"; }; then
    fail "the drained job: wait exited ${f[many_wait_exit]}: $(tail -1 "$work/result/many.json")"
fi
[ "${f[many_outputs]}" = "${f[many_inputs]}" ] || fail "the drained job: ${f[many_outputs]} outputs for ${f[many_inputs]} inputs"
grep -Eq "\"succeeded\" ?: ?${f[many_inputs]}[,}]" "$work/result/many.json" || fail "the drained job: $(tail -1 "$work/result/many.json")"
if ! { [ "${f[many_records]}" = "${f[many_inputs]}" ] && [ "${f[many_distinct_inputs]}" = "${f[many_inputs]}" ]; }; then
    fail "the drained job: ${f[many_records]} records for ${f[many_distinct_inputs]} distinct of ${f[many_inputs]} inputs"
fi
printf 'systemd test: ok (systemd-nspawn --boot, %.0f s): %s inputs -> %s outputs owned by tessera in %.2f s (%.2f s after enable --now);' \
    "$seconds" "$inputs" "${f[outputs]}" "${f[job_seconds]}" "${f[since_enable_seconds]}"
printf ' worker@1 stopped after %s of %s tasks: drained in %.2f s, the job finished (tasks per worker %s, each once, 0 failed);' \
    "${f[drain_after_succeeded]}" "${f[many_inputs]}" "${f[tessera-worker@1.stop_seconds]}" "${f[many_per_worker]}"
printf ' stop: worker@2 %.2f s, coordinator %.2f s; each Result=success exit 0\n' \
    "${f[tessera-worker@2.stop_seconds]}" "${f[tessera-coordinator.stop_seconds]}"
