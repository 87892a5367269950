-- Cycles through the paths listed one per line in the file given after "--", each request with the
-- same headers (the second argument: an Authorization value, optional); prints one JSON line.
local requests = {}
local next_request = 0

function init(args)
  local file = assert(io.open(args[1], "r"))
  local headers = {}
  if args[2] ~= nil and args[2] ~= "" then headers["Authorization"] = args[2] end
  for line in file:lines() do
    if line ~= "" then requests[#requests + 1] = wrk.format("GET", line, headers) end
  end
  file:close()
end

function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end

function done(summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"errors":%d,"seconds":%.3f,"p50":%.3f,"p90":%.3f,"p99":%.3f,"max":%.3f}\n',
    summary.requests, e.connect + e.read + e.write + e.status + e.timeout, summary.duration / 1e6,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
