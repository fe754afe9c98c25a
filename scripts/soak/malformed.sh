#!/usr/bin/env bash
# Malformed-input client for scripts/soak.sh: until $1 (epoch seconds) or $2 requests,
# posts bodies the server must refuse with a 4xx — never a 5xx, never a dropped
# connection — each over a fresh TLS connection (so it also handshakes against every
# rotated certificate). Writes one line per request to $3: "case http_code".
#
# Mostly HTTP/1.1, the API server's protocol. Over HTTP/2 only cases whose body the server
# reads to the end: when it answers early (415, 404, 413) it ends the stream with
# RST_STREAM(NO_ERROR) after the complete response, as RFC 9113 §8.1 allows, and curl
# 7.88 reports that as error 92 and drops the response (nghttp and Go's client, which the
# API server uses, accept it).
# Usage: malformed.sh END_EPOCH MAX_REQUESTS OUT_FILE URL_BASE CA_FILE WORK_DIR
set -euo pipefail
end=$1 max=$2 out=$3 base=$4 ca=$5 work=$6

# Bodies, built once.
printf '\x00\xff{{{not json' >"$work/garbage.bin"
printf '{"apiVersion":"v1","kind":"ConfigMap"}' >"$work/not-review.json"
printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}' >"$work/no-uid.json"
printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"spec":' >"$work/truncated.json"
: >"$work/empty.json"
# 17 MiB: over the default 16 MiB limit.
head -c $((17 << 20)) /dev/zero | tr '\0' ' ' >"$work/oversized.json"

post() { # case content-type file path [curl protocol flag]
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$ca" "${5:---http1.1}" \
    -H "Content-Type: $2" --data-binary @"$3" "$base$4" || true)
  echo "$1 $code" >>"$out"
}

i=0
while (( i < max )) && (( $(date +%s) < end )); do
  case $(( i % 10 )) in
    0) post garbage application/json "$work/garbage.bin" /mutate ;;
    1) post wrong-content-type text/plain "$work/not-review.json" /mutate ;;
    2) post not-a-review application/json "$work/not-review.json" /mutate/auto ;;
    3) post no-uid application/json "$work/no-uid.json" /validate ;;
    4) post truncated application/json "$work/truncated.json" /mutate ;;
    5) post empty application/json "$work/empty.json" /mutate ;;
    6) post unknown-path application/json "$work/not-review.json" /nope ;;
    7) if (( i % 40 == 7 )); then post oversized application/json "$work/oversized.json" /mutate
       else post garbage application/json "$work/garbage.bin" /validate; fi ;;
    8) post h2-garbage application/json "$work/garbage.bin" /mutate --http2 ;;
    9) post h2-no-uid application/json "$work/no-uid.json" /mutate/auto --http2 ;;
  esac
  i=$(( i + 1 ))
  sleep 0.2
done
