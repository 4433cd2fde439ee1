#!/usr/bin/env bash
# The main job (`make run`): ingest the default corpus, build every index (SQLite FTS5, MiniLM vectors in
# qdrant-edge, BM25 sparse vectors, the PostgreSQL mirror), run the evaluation sweep on the train split
# (AND and OR lexical semantics), the evidence studies, ingest the CiteULike-a user libraries and evaluate the
# recommender on them (scix eval-recs), and the standard reports; ends with what it wrote.
# Idempotent: an unchanged corpus is not rebuilt, embeddings come from the cache, a sweep whose index
# build, gold set, settings and (clean) commit are unchanged is reused.
# Two lanes once the search corpus is encoded: the recommendation step (its ingest and `scix eval-recs`, two
# processes) runs in the background beside the search side's PostgreSQL mirror, sweeps, evidence studies and
# reports, which keep one core busy; its output is printed when it ends (reports/logs/), then its report.
# A corpus missing from the data directory (SCIX_DATA_DIR, else data/) is fetched first (`scix data fetch`).
# Knobs (environment): DATASET / INDEX the search corpus and its index (scifact); SPLIT the gold split the
# sweeps and reports use (train); LIBRARIES the user-library corpus of the recommendation step (citeulike-a);
# REC_USERS the users `scix eval-recs` samples (500); MIRROR a URL base to fetch missing corpora from
# instead of their public copies (`scix data fetch --url-base`); HEARTBEAT the seconds between progress
# lines (30); SCIX_REPORTS_DIR where everything is written (reports/).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bin=${BIN:-$here/.venv/bin}
dataset=${DATASET:-scifact}
index=${INDEX:-scifact}
split=${SPLIT:-train}
libraries=${LIBRARIES:-citeulike-a}
rec_users=${REC_USERS:-500}
reports=${SCIX_REPORTS_DIR:-$here/reports}
export SCIX_REPORTS_DIR=$reports
t0=$(date +%s)
beat=""
dsn=""
lane=""  # the recommendation step's background lane
quiet_beat() {  # the heartbeat loop and its sleep, which would otherwise hold the output open
  [ -z "$beat" ] && return 0
  local children; children=$(pgrep -P "$beat" || true)
  kill "$beat" $children 2>/dev/null || true
  beat=""
}
kill_tree() { local c; for c in $(pgrep -P "$1" || true); do kill_tree "$c"; done; kill "$1" 2>/dev/null || true; }
cleanup() { quiet_beat; [ -n "$lane" ] && kill_tree "$lane"; [ -n "$dsn" ] && scripts/postgres.sh stop; return 0; }
trap cleanup EXIT
# one line per step, then a heartbeat line every HEARTBEAT seconds while it runs (the long steps run --quiet)
step() {
  quiet_beat
  printf '\n== %s (%ss)\n' "$1" $(( $(date +%s) - t0 ))
  [ "$1" = done ] && return
  ( s=$(date +%s); while sleep "${HEARTBEAT:-30}"; do
      printf '   ... %s: %ss so far\n' "$1" $(( $(date +%s) - s )); done ) &
  beat=$!
}

data_dir=${SCIX_DATA_DIR:-$here/data}
# a corpus missing from the data directory is fetched (checksummed) when it has a public copy and is reachable;
# otherwise the job stops here, saying what to do
need() {
  [ -d "$data_dir/$1" ] && return 0
  step "fetch $1 into $data_dir (scix data fetch, checksum verified)"
  if ! "$bin/scix" data fetch "$1" --dest "$data_dir" ${MIRROR:+--url-base "$MIRROR"}; then
    echo "main job: corpus '$1' is not in $data_dir and could not be fetched; put it there or set SCIX_DATA_DIR" >&2
    exit 1
  fi
}
need "$dataset"
need "$libraries"

step "ingest $dataset -> index $index (FTS5, vectors, sparse)"
"$bin/scix" ingest --dataset "$dataset" --index "$index" --sparse --quiet

# the recommendation step in the background: CPU-bound in two processes, beside the search side's one
mkdir -p "$reports/logs"
lane_log="$reports/logs/main-job-$libraries.log"
printf '\n== ingest %s -> index %s (user libraries), recommendation evaluation: in the background (%ss)\n' \
  "$libraries" "$libraries" $(( $(date +%s) - t0 ))
( "$bin/scix" ingest --dataset "$libraries" --index "$libraries" --quiet
  "$bin/scix" eval-recs --index "$libraries" --users "$rec_users" --json "$reports/eval-recs-$libraries.json" \
    --quiet ) > "$lane_log" 2>&1 &
lane=$!

step "PostgreSQL mirror"
dsn=$(scripts/postgres.sh start)
SCIX_PG_DSN=$dsn "$bin/scix" ingest --dataset "$dataset" --index "$index" --sparse --backend postgres --quiet

for mode in auto and or; do  # auto: the default the gate chose
  step "evaluation sweep on $split, lexical $mode"
  "$bin/scix" eval --index "$index" --split "$split" --sweep --baseline hybrid --lexical-mode "$mode" \
    --json "$reports/eval-$index-$split-$mode.json" --reuse --quiet
done

step "evidence studies"
"$bin/scix" evidence quantization --index "$index" --split "$split" --out "$reports" >/dev/null
"$bin/scix" evidence pool --index "$index" --out "$reports" >/dev/null
for mode in and or; do
  "$bin/scix" evidence rrf-k --index "$index" --split "$split" --lexical-mode "$mode" --out "$reports" >/dev/null
done
ls "$reports"/evidence-*-"$index"*.md

step "reports of the search side (all but recommendation-eval)"
"$bin/scix" report all --skip recommendation-eval -p index "$index" -p lexical_mode auto -p gold "$split"

step "waiting for the recommendation step ($lane_log)"
status=0
wait "$lane" || status=$?
lane=""
cat "$lane_log"
if [ "$status" -ne 0 ]; then
  echo "main job: the recommendation step failed (exit $status; its output is above, and in $lane_log)" >&2
  exit "$status"
fi

step "report recommendation-eval"
"$bin/scix" report recommendation-eval -p report "$reports/eval-recs-$libraries.json"

step "done"
echo "main job finished in $(( $(date +%s) - t0 )) s; open these:"
ls -1 "$reports"/*/*.html "$reports"/eval-"$index"-*.json "$reports"/eval-recs-*.json "$reports"/evidence-*-"$index"*.md
