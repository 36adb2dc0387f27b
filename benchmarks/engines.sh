#!/bin/bash
# The engine's cost alone: two engines grade the same correct class of the same course, interleaved.
#
#   bash benchmarks/engines.sh OLD_COMMIT [NEW_COMMIT=HEAD] [ROUNDS=4] [STUDENTS=6]
#
# Both engines grade the course (assignment.yaml, reference/, exercises/, graders/) of OLD_COMMIT with
# cuda_standin off, so a course that gained checks since does not count against the new engine. Each
# engine is a detached worktree of its commit, run from this checkout's venv with PYTHONPATH (the engine
# imported is asserted). Runs alternate (old new, new old, ...) so that a machine's changing load falls
# on both; each line gives the wall seconds of `torchgrade grade CLASS -j 2 --isolation bwrap` and the
# load average; the last line the median of each and their ratio. On a shared machine repeat it.
set -euo pipefail
old=$1; new=${2:-HEAD}; rounds=${3:-4}; students=${4:-6}
repo=$(git rev-parse --show-toplevel)
python=${PYTHON:-$repo/.venv/bin/python}
work=$(mktemp -d /tmp/torchgrade-engines-XXXXXX)
trap 'git -C "$repo" worktree remove --force "$work/old" >/dev/null 2>&1 || true;
      git -C "$repo" worktree remove --force "$work/new" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$repo" worktree add --detach "$work/old" "$old" >/dev/null 2>&1
git -C "$repo" worktree add --detach "$work/new" "$new" >/dev/null 2>&1
mkdir -p "$work/course"
for part in assignment.yaml reference exercises graders; do cp -r "$work/old/$part" "$work/course/"; done
sed -i 's/^cuda_standin:.*/cuda_standin: "off"/' "$work/course/assignment.yaml"
for i in $(seq -w 1 "$students"); do
    mkdir -p "$work/class/student$i"
    for f in "$work/course/reference/"*.py; do
        { cat "$f"; echo "# student$i"; } > "$work/class/student$i/$(basename "$f")"
    done
done

one() {  # one.sh ENGINE -> appends "ENGINE SECONDS" to $work/times
    local engine=$1 out="$work/out-$1" start end
    rm -rf "$out"
    start=$(date +%s.%N)
    (cd "$work/course" && PYTHONPATH="$work/$engine" "$python" -c "import torchgrade; \
assert torchgrade.__file__.startswith('$work/$engine'), torchgrade.__file__; \
from torchgrade.cli import main; main()" grade "$work/class" --out "$out" -j 2 --no-progress --isolation bwrap \
        >/dev/null 2>"$out.err")
    end=$(date +%s.%N)
    echo "$engine $(echo "$end - $start" | bc) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$work/times"
}

for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then one old; one new; else one new; one old; fi
done
"$python" - "$work/times" <<'EOF'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    engine, seconds, *_ = line.split()
    times.setdefault(engine, []).append(float(seconds))
old, new = statistics.median(times["old"]), statistics.median(times["new"])
print(f"median old {old:.2f} s, new {new:.2f} s: new/old = {new / old:.3f} ({len(times['old'])} runs each)")
EOF
