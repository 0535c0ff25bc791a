#!/bin/bash
# The image's HEALTHCHECK: GET /healthz on tierd's listen address over bash's /dev/tcp (the slim
# base has no curl). The address: TIERD_HEALTHCHECK_ADDR, else the `listen` key of the config
# tierd runs with (PID 1's --config), else 127.0.0.1:7070. Exit 0 on a 200 answer.
set -u
addr="${TIERD_HEALTHCHECK_ADDR:-}"
if [ -z "$addr" ]; then
  config=/etc/tierd/tierd.toml
  args=()
  mapfile -d '' args </proc/1/cmdline 2>/dev/null || true
  for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
    --config) config="${args[i + 1]:-$config}" ;;
    --config=*) config="${args[i]#--config=}" ;;
    esac
  done
  addr="$(sed -n 's/^[[:space:]]*listen[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$config" \
    2>/dev/null | head -n 1)"
fi
addr="${addr:-127.0.0.1:7070}"
host="${addr%:*}"
port="${addr##*:}"
host="${host#[}"
host="${host%]}"
case "$host" in
0.0.0.0 | "") host=127.0.0.1 ;;
::) host=::1 ;;
esac
exec 3<>"/dev/tcp/$host/$port" || exit 1
printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n' "$addr" >&3
IFS=' ' read -r -t 5 _ status _ <&3 || exit 1
[ "$status" = 200 ]
