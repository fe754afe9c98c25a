-- wrk script: POST the seed Job's AdmissionReview on every request (keep-alive, TLS).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local path = os.getenv("BENCH_BODY") or "examples/review-job-worker.json"
local file = assert(io.open(path, "r"))
wrk.body = file:read("*a")
file:close()
