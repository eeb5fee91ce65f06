# Sourced by bench/gpu/verify_*.sh, from the repository's top: a scratch git tree holding decode.py (results/
# ignored) registered as tree `t` in a new store; `sm` runs stackmgr, echoing the command; the working directory
# is then the scratch directory ($w), $repo the repository, $out where files come back.
set -euo pipefail
repo=$(pwd); out=${OUT:-/tmp/out}; mkdir -p "$out"
export GIT_AUTHOR_NAME=lab GIT_AUTHOR_EMAIL=lab@example.com GIT_COMMITTER_NAME=lab GIT_COMMITTER_EMAIL=lab@example.com
sm() { echo "\$ stackmgr $*" >&2; python3 -m stackmgr "$@"; }
w=$(mktemp -d); cd "$w"
git init -q -b main tree && cp "$repo/bench/gpu/decode.py" tree/ && printf 'results/\n' > tree/.gitignore
git -C tree add -A && git -C tree commit -qm base
python3 -m stackmgr init store >/dev/null && export STACKMGR_STORE=$w/store
python3 -m stackmgr tree add t "$w/tree" >/dev/null
