-- wrk script for scripts/soak.sh: POSTs the AdmissionReview in $SOAK_BODY at a steady
-- rate ($SOAK_RATE requests/s spread over all connections, via wrk's delay() hook) and
-- checks every answer: HTTP 200 with "allowed":true. Prints one summary line that
-- soak.sh parses: "soak-wrk requests=N ok=N bad=N p50_ms=… p99_ms=… max_ms=…".
local body_file = os.getenv("SOAK_BODY")
local f = assert(io.open(body_file, "rb"))
local body = f:read("*a")
f:close()

local rate = tonumber(os.getenv("SOAK_RATE") or "100")
local connections = tonumber(os.getenv("SOAK_CONNECTIONS") or "4")
local pause_ms = math.max(1, math.floor(connections * 1000 / rate))

wrk.method = "POST"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

ok, bad = 0, 0
function response(status, headers, resp)
  if status == 200 and string.find(resp, '"allowed":true', 1, true) then
    ok = ok + 1
  else
    bad = bad + 1
    if bad <= 5 then
      io.stderr:write("soak-wrk bad answer: " .. status .. " " .. string.sub(resp or "", 1, 200) .. "\n")
    end
  end
end

function delay()
  return pause_ms
end

function done(summary, latency, requests)
  local good, wrong = 0, 0
  for _, t in ipairs(threads) do
    good = good + (t:get("ok") or 0)
    wrong = wrong + (t:get("bad") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    "soak-wrk requests=%d ok=%d bad=%d connect_errors=%d read_errors=%d write_errors=%d timeouts=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n",
    summary.requests, good, wrong, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
