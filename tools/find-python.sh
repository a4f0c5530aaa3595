# python_for X.Y: the path of a Python X.Y interpreter: on PATH, in pyenv, or one uv has installed
# (`uv python install X.Y`).
# Sourced by setup-venv.sh and check-runtime.sh.
python_for() {
  local v=$1 c
  for c in "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$v".*/bin/python"$v" $(command -v "python$v" 2>/dev/null); do
    if [ -x "$c" ] && "$c" -c 'import sys' 2>/dev/null; then echo "$c"; return 0; fi  # a pyenv shim may not run
  done
  uv python find "$v" 2>/dev/null
}
