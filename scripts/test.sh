#!/usr/bin/env bash
# The Floe test command: installs test dependencies, builds, runs Rust tests,
# then the end-to-end suite with real Kafka clients.
#
#   bash scripts/test.sh              # everything
#   bash scripts/test.sh --deps-only  # only install kcat + the Python venv
#   bash scripts/test.sh --e2e-only   # skip cargo; run pytest against $FLOE_BIN
#   bash scripts/test.sh --chaos-only # skip cargo and pytest; run the fault harness's short schedule
#   CHAOS_DURATION=30m bash scripts/test.sh --chaos-only   # a longer schedule (see docs/RELIABILITY.md)
#   CHAOS_S3=1 bash scripts/test.sh --chaos-only           # objects in S3 (moto_server from .venv)
#   CHAOS_HOSTILE_DURATION=5m bash scripts/test.sh --chaos-only  # a longer hostile-tenant attack
#   E2E_WORKERS=1 bash scripts/test.sh --e2e-only        # e2e workers (default 6; 0: no xdist)
#   extra args after `--` are passed to pytest (both e2e passes), e.g. -- -k crash
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

MODE=all
PYTEST_EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deps-only) MODE=deps ;;
    --e2e-only) MODE=e2e ;;
    --chaos-only) MODE=chaos ;;
    --) shift; PYTEST_EXTRA=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

# Each step's wall time, printed as the next starts and summed up at exit (pass or fail), so a
# slow CI run shows where its minutes went.
STEP_NAME="" STEP_STARTED=$SECONDS STEP_TIMES=()
end_step() {
  [[ -n "$STEP_NAME" ]] || return 0
  local took=$((SECONDS - STEP_STARTED))
  STEP_TIMES+=("$(printf '%5d s  %s' "$took" "$STEP_NAME")")
  printf '    (%d s)\n' "$took"
  STEP_NAME=""
}
step() {
  end_step
  printf '\n==> %s\n' "$*"
  STEP_NAME="$*" STEP_STARTED=$SECONDS
}
step_times() {
  end_step
  [[ ${#STEP_TIMES[@]} -gt 0 ]] || return 0
  printf '\n==> time per step (%d cores)\n' "$(nproc)"
  printf '%s\n' "${STEP_TIMES[@]}"
  printf '%5d s  in all\n' "$SECONDS"
}

# Background steps run beside steps that leave a core idle (the test deps beside the build; the
# infra checks and the fault harness beside the e2e parallel pass, whose tests mostly wait):
# output goes to a log, printed when the step is awaited.
BG_PIDS=() BG_NAMES=() BG_LOGS=() BG_STARTED=()
background() {
  local name="$1" log
  shift
  log="$(mktemp -t floe-ci-step.XXXXXX)"
  printf '\n==> %s (in the background; its output follows when it ends)\n' "$name"
  # The step's own time, written when it exits however it exits (the await may come later).
  (
    trap 'echo $((SECONDS - started)) >"$log.took"' EXIT
    started=$SECONDS
    "$@"
  ) >"$log" 2>&1 &
  BG_PIDS+=("$!") BG_NAMES+=("$name") BG_LOGS+=("$log") BG_STARTED+=("$SECONDS")
}
await_background() {
  end_step
  local i rc
  for i in "${!BG_PIDS[@]}"; do
    set +e
    wait "${BG_PIDS[$i]}"
    rc=$?
    set -e
    local took=$((SECONDS - BG_STARTED[i]))
    [[ -s "${BG_LOGS[$i]}.took" ]] && took="$(cat "${BG_LOGS[$i]}.took")"
    printf '\n==> %s (ran in the background)\n' "${BG_NAMES[$i]}"
    cat "${BG_LOGS[$i]}"
    rm -f "${BG_LOGS[$i]}" "${BG_LOGS[$i]}.took"
    printf '    (%d s, in the background)\n' "$took"
    STEP_TIMES+=("$(printf '%5d s  %s (in the background)' "$took" "${BG_NAMES[$i]}")")
    if [[ $rc -ne 0 ]]; then
      echo "${BG_NAMES[$i]} failed (exit $rc)" >&2
      BG_PIDS=()
      exit "$rc"
    fi
  done
  BG_PIDS=() BG_NAMES=() BG_LOGS=() BG_STARTED=()
}
# On a failure elsewhere, background steps (and what they started) are stopped, not orphaned;
# the test deps' step is waited for instead (an interrupted dpkg would refuse the next install).
DEPS_PID=""
stop_background() {
  local pid
  for pid in "${BG_PIDS[@]}"; do
    if [[ "$pid" == "$DEPS_PID" ]]; then
      wait "$pid" 2>/dev/null || true
      continue
    fi
    pkill -TERM -P "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
}
on_exit() {
  stop_background
  step_times
}
trap on_exit EXIT

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/floe-target}"
export FLOE_BIN="${FLOE_BIN:-$CARGO_TARGET_DIR/debug/floe}"

# ---------------------------------------------------------------- deps
# Debian packages the tests need, installed once: apt_install PACKAGE... (as root, or with sudo).
apt_install() {
  echo "installing $* (apt-get)"
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# kcat for the e2e tests; OpenSSL headers and pkg-config for the load generator's librdkafka,
# which needs OpenSSL for SCRAM and TLS.
install_kcat() {
  if command -v kcat >/dev/null 2>&1 && [[ -f /usr/include/openssl/ssl.h ]] && command -v pkg-config >/dev/null 2>&1; then
    echo "kcat present: $(command -v kcat); OpenSSL headers present"
    return
  fi
  apt_install kcat libssl-dev pkg-config
  command -v kcat >/dev/null
}

# Prometheus and promtool: the alert rules' unit tests, and the dashboard test's real server.
install_prometheus() {
  if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    echo "prometheus present: $(prometheus --version 2>&1 | head -1)"
    return
  fi
  apt_install --no-install-recommends prometheus
  command -v promtool >/dev/null
}

# Chromium and its WebDriver for the web console's browser test.
install_browser() {
  if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    echo "chromium present: $(chromedriver --version 2>/dev/null | cut -d' ' -f1-2)"
    return
  fi
  apt_install chromium chromium-driver
  command -v chromedriver >/dev/null
}

# The venv is built once per requirements file under $FLOE_VENVS (outside the clone) and .venv
# links to it, so a fresh clone (as CI makes) finds it ready instead of installing every client
# again. A .venv that is a directory of its own is kept and used as before.
install_venv() {
  local venv="$ROOT/.venv" req="$ROOT/tests/requirements.txt"
  local want have=""
  want="$(sha256sum "$req" | cut -d' ' -f1)"
  if [[ ! -d "$venv" || -L "$venv" ]]; then
    local shared="${FLOE_VENVS:-/var/tmp/floe-venvs}/${want:0:16}"
    mkdir -p "$shared"
    ln -sfn "$shared" "$venv"
  fi
  # Everything below works on the link's target: pip writes the python it was started as into
  # each script's #! line, and a clone's own path dies with the clone.
  local real
  real="$(readlink -f "$venv")"
  local stamp="$real/.requirements.sha256"
  # A venv whose scripts name another python (made through an old clone's link) is rebuilt.
  if [[ -f "$real/bin/moto_server" && "$(head -n1 "$real/bin/moto_server")" != "#!$real/bin/python"* ]]; then
    echo "venv at $real has scripts of another path; rebuilding it"
    rm -rf "$real"
  fi
  if [[ ! -x "$real/bin/python" ]]; then
    echo "creating venv at $real"
    python3 -m venv "$real"
  fi
  [[ -f "$stamp" ]] && have="$(cat "$stamp")"
  if [[ "$have" == "$want" ]]; then
    echo "python test deps up to date (.venv -> $real)"
    return
  fi
  echo "installing python test deps into $real (tests/requirements.txt)"
  "$real/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$real/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  echo "$want" >"$stamp"
}

# The build needs only kcat's step (OpenSSL headers for librdkafka); in a whole run the rest
# (downloads and unpacking, mostly waiting) goes on beside the build and is awaited before the
# e2e suite, the first step that needs it.
other_deps() {
  install_prometheus
  install_browser
  install_venv
}
step "test deps (kcat, OpenSSL headers)"
install_kcat
if [[ "$MODE" == all ]]; then
  background "test deps (prometheus, chromium, python venv)" other_deps
  DEPS_PID="${BG_PIDS[-1]}"
else
  step "test deps (prometheus, chromium, python venv)"
  other_deps
fi
if [[ "$MODE" == deps ]]; then
  echo "deps ready"
  exit 0
fi

# ---------------------------------------------------------------- cargo
# Clippy's lints run inside the build: clippy-driver (rustc with clippy's lints, as `cargo
# clippy` runs it) compiles the workspace's own crates, every target, with warnings as errors.
# `cargo clippy` would check every dependency a second time, in check mode (cold: about six
# minutes of both cores); this way they are compiled once and the lints cost only the
# workspace's crates. Cargo replays a fresh crate's warnings, and a crate that failed is never
# fresh.
linted() {
  RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)" \
    CLIPPY_ARGS="-Dwarnings__CLIPPY_HACKERY__" "$@"
}

if [[ "$MODE" == all ]]; then
  step "cargo fmt --check"
  cargo fmt --all -- --check

  step "cargo build --workspace --all-targets, with clippy's lints (warnings are errors; CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
  linted cargo build --workspace --all-targets
  step "the previous version's floe, for the rolling-upgrade test (scripts/build-previous.sh)"
  bash scripts/build-previous.sh

  if cargo nextest --version >/dev/null 2>&1; then
    step "cargo nextest run --workspace"
    linted cargo nextest run --workspace
  else
    step "cargo test --workspace"
    linted cargo test --workspace
  fi
fi

# ---------------------------------------------------------------- terraform, prometheus
infra_checks() {
  bash scripts/test-terraform.sh
  echo "==> prometheus rules (promtool check rules, promtool test rules)"
  promtool check rules deploy/prometheus/rules.yml
  (cd deploy/prometheus && promtool test rules rules.test.yml)
}

# ---------------------------------------------------------------- chaos
# The fault harness (chaos/): a 3+2 cluster under scheduled kills, pauses, partitions and
# object-store faults, then the checker. Partitions need network namespaces (root and iproute2);
# without them the run goes on over loopback and says so. Its checks are of correctness only
# (nothing acknowledged lost, offsets, groups, transactions), so it may share the machine; the
# hostile-tenant mode below measures latency and runs alone.
CHAOS_BIN="$CARGO_TARGET_DIR/debug/floe-chaos"
CHAOS_DIR="${TMPDIR:-/tmp}/floe-chaos-ci"
CHAOS_NETWORK=netns
if [[ "$(id -u)" != 0 ]] || ! command -v ip >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
  CHAOS_NETWORK=loopback
fi
CHAOS_STEP="fault-injection harness, ${CHAOS_DURATION:-90s} of faults ($CHAOS_BIN; logs in $CHAOS_DIR)"
fault_harness() {
  if [[ "$CHAOS_NETWORK" == loopback ]]; then
    echo "no network namespaces here (needs root and iproute2): partitions are left out"
  fi
  local s3=()
  if [[ -n "${CHAOS_S3:-}" ]]; then
    s3=(--s3-server "$ROOT/.venv/bin/moto_server")
  fi
  rm -rf "$CHAOS_DIR"
  "$CHAOS_BIN" --floe "$FLOE_BIN" --duration "${CHAOS_DURATION:-90s}" --network "$CHAOS_NETWORK" --work-dir "$CHAOS_DIR" \
    --metadata-certs-script "$ROOT/scripts/metadata-certs.sh" --python "$ROOT/.venv/bin/python" "${s3[@]}"
}

# ---------------------------------------------------------------- e2e
# Two passes. First every test not marked `serial`, in E2E_WORKERS pytest-xdist workers: the
# tests mostly wait (sleeps, timeouts, session expiries, a debug binary's start): with 3 workers
# about one of two cores was busy, and with 4 and the fault harness beside them 1.1, so 6 workers
# run, and beside them the Terraform checks and the fault harness (E2E_WORKERS=0: one
# process). Each worker hands out ports from a block of its own (tests/e2e/conftest.py). Then the tests marked `serial`
# (latency, throughput or time budgets, floods of connections), one at a time with nothing else
# running. A failure stops the pass it is in (-x) and skips the serial pass.
if [[ "$MODE" == all || "$MODE" == e2e ]]; then
await_background
step "end-to-end tests (pytest tests/e2e, FLOE_BIN=$FLOE_BIN)"
if [[ ! -x "$FLOE_BIN" ]]; then
  echo "FLOE_BIN=$FLOE_BIN is not an executable; build it first" >&2
  exit 1
fi
export PATH="$ROOT/.venv/bin:$PATH"
export FLOE_PREVIOUS_BIN="${FLOE_PREVIOUS_BIN:-$(bash scripts/build-previous.sh | tail -1)}"
E2E_WORKERS="${E2E_WORKERS:-6}"

# e2e_pass NAME PYTEST_ARGS...: one pass; a failure exits, and "collected no tests" (pytest's 5)
# fails when nothing narrows the run, and is returned (5) when extra arguments may have.
e2e_pass() {
  local name="$1" rc
  shift
  step "end-to-end tests: $name pass (pytest $*)"
  set +e
  "$ROOT/.venv/bin/python" -m pytest tests/e2e -x -q -ra --durations=15 -p no:cacheprovider "$@"
  rc=$?
  set -e
  if [[ $rc -eq 5 && ${#PYTEST_EXTRA[@]} -eq 0 ]]; then
    echo "pytest collected no tests in the $name pass: failing" >&2
    exit 1
  fi
  if [[ $rc -ne 0 && $rc -ne 5 ]]; then
    echo "end-to-end tests failed ($name pass, pytest exit $rc)" >&2
    exit "$rc"
  fi
  return "$rc"
}

parallel=(--e2e-pass parallel)
if [[ "$E2E_WORKERS" != 0 ]]; then
  # Tests go to workers one at a time (at most two assigned to one at once): a long test holds
  # no queue behind it, and after a failure each other worker runs at most one more.
  parallel+=(-n "$E2E_WORKERS" --dist load --maxschedchunk 1)
fi
if [[ "$MODE" == all ]]; then
  background "terraform offline checks (fmt, structure, checkov) and prometheus rules" infra_checks
  # Over loopback its ports would come from the e2e workers' range: then it runs after them.
  if [[ "$CHAOS_NETWORK" == netns ]]; then
    background "$CHAOS_STEP" fault_harness
  fi
fi
empty=0
e2e_pass parallel "${parallel[@]}" "${PYTEST_EXTRA[@]}" || empty=$((empty + 1))
await_background
# `-n 0` last, so no extra argument makes this pass parallel.
e2e_pass serial --e2e-pass serial "${PYTEST_EXTRA[@]}" -n 0 || empty=$((empty + 1))
if [[ $empty -eq 2 ]]; then
  echo "pytest collected no tests in either pass (extra arguments: ${PYTEST_EXTRA[*]}): failing" >&2
  exit 1
fi
fi

# ---------------------------------------------------------------- chaos
if [[ "$MODE" == all || "$MODE" == chaos ]]; then
  # In a whole run with network namespaces the fault harness ran beside the e2e parallel pass.
  if [[ "$MODE" == chaos || "$CHAOS_NETWORK" == loopback ]]; then
    step "$CHAOS_STEP"
    fault_harness
  fi

  # The hostile-tenant mode: the same workloads as tenant `chaos` while tenant `hostile`
  # floods idle connections, bad frames, long-polls and over-quota produce, sends shared-type
  # schemas to the registry and to table topics, and churns connections.
  step "hostile-tenant harness, ${CHAOS_HOSTILE_DURATION:-45s} of attack (logs in $CHAOS_DIR-hostile)"
  rm -rf "$CHAOS_DIR-hostile"
  "$CHAOS_BIN" --floe "$FLOE_BIN" --duration "${CHAOS_HOSTILE_DURATION:-45s}" --network "$CHAOS_NETWORK" \
    --work-dir "$CHAOS_DIR-hostile" --metadata-certs-script "$ROOT/scripts/metadata-certs.sh" \
    --python "$ROOT/.venv/bin/python" --hostile-tenant
fi
end_step
printf '\n==> all tests passed\n'
