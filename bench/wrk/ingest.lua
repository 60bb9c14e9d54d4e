-- wrk script: POST a lead with a distinct e-mail on every request, spread round-robin over the
-- source keys listed in a file (one per line), so every request creates a lead and no key goes
-- over its 60 per minute limit.
-- usage: wrk -s ingest.lua <url> -- <keys file> <run tag>
local threads = {}

function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end

function init(args)
  keys = {}
  for line in io.lines(args[1]) do
    if #line > 0 then table.insert(keys, line) end
  end
  tag = args[2] or "run"
  counter = 0
  thread_count = 64
end

function request()
  counter = counter + 1
  local index = ((counter * 7 + thread_id) % #keys) + 1
  local body = string.format(
    '{"first_name":"Bench","last_name":"User","email":"%s-%d-%d@example.com","status":"new","company":"Acme Ltd"}',
    tag, thread_id, counter)
  return wrk.format("POST", "/api/webhook/lead/" .. keys[index], { ["Content-Type"] = "application/json" }, body)
end
