# Pinned Python virtual environments for the test tools, kept between runs in $OPLEDGER_TOOLS
# (default ~/.cache/opledger). Sourced by scripts/python-client, scripts/mcp-python and
# scripts/schemathesis.
#
#   venv_ensure NAME REQUIREMENT...   prints the environment's directory, creating it first
#                                     if it is missing or holds other pins
#   venv_pip DIR ARGS...              pip acting on that environment
#
# The first run creates an environment (python3 -m venv and pip, under a minute). A stamp file,
# written last, names what is installed: changing the pins re-creates it, and an interrupted
# install is redone from scratch. Parallel runs share the cache; one installs at a time.

venv_pip() {
    local dir=$1
    shift
    # Debian's python3 without python3-venv has no ensurepip: then the system's pip, pointed
    # at the environment.
    if "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
        "$dir/bin/python" -m pip --disable-pip-version-check "$@"
    else
        python3 -m pip --disable-pip-version-check --python "$dir/bin/python" "$@"
    fi
}

venv_ensure() {
    local name=$1
    shift
    local tools=${OPLEDGER_TOOLS:-$HOME/.cache/opledger}
    local dir="$tools/$name" pins="$*"
    _venv_ready() {
        [[ -x "$dir/bin/python" && "$(cat "$dir/.opledger-requirements" 2>/dev/null)" == "$pins" ]]
    }
    if ! _venv_ready; then
        mkdir -p "$tools"
        (
            flock 9
            # Another run may have installed it while this one waited for the lock.
            if ! _venv_ready; then
                echo "$(basename "$0"): installing $pins into $dir" >&2
                # A venv records its own path, so it is built where it stays.
                rm -rf "$dir"
                if ! python3 -m venv "$dir" 2>/dev/null; then
                    rm -rf "$dir"
                    python3 -m venv --without-pip "$dir"
                fi
                venv_pip "$dir" install --quiet "$@" >&2
                echo "$pins" >"$dir/.opledger-requirements"
            fi
        ) 9>"$tools/$name.lock"
    fi
    echo "$dir"
}
