"""The Lua that reads a request's work in Envoy, for the per-route script (envoy_lua.py). Pure text.

The script sheds a request whose work lies in a shed range (envoy_work.py puts the ranges on a
lane's routes). It reads the work as the gateway does (collector/openai_api/request_reading.py):
the bound (chat: `max_completion_tokens` when not null, else `max_tokens`, both unset the
route's `missing`; completions: `max_tokens`, unset 16) x `n`, or `best_of` when larger (chat:
null `n` is 1; completions refuse it) x the prompts of a completions body (each `prompt_embeds`
entry, then text or token ids one, a list one each; at least one). A count is pydantic's lax
int: a JSON integer, an integral float, a string of one (spaces around, `_` between digits, a
`.0` tail), a bool for a bound only. Anything else, and an `n` or `best_of` below 1, is a 400
naming the field, as the gateway answers; a body that is no JSON object the walk reads goes on
unshed (vLLM answers it 400 without work). The last of a repeated top-level key counts, as
Python's JSON reader keeps it. Uses the JSON walk of envoy_lua.py (`each_member`, `skip_ws`,
`skip_value`, `read_string`, `literal`), which comes before it in the script.
"""

from __future__ import annotations

from typing import Final

__all__ = ["WORK_LUA"]

WORK_LUA: Final = r"""
-- Each top-level key's last value span, and where the object closes; nil when the body is not an
-- object the walk reads.
local function top_level(s, start)
  local values = {}
  local close = each_member(s, start, function(key, first, last) values[key] = {first, last} end)
  if not close then return nil end
  return values, close
end

-- A whole number in pydantic's lax reading of a string: spaces around, `_` between digits, a `.0` tail.
local function int_text(t)
  t = t:match('^%s*(.-)%s*$')
  local sign, digits = t:match('^([+-]?)([%d_]+)$')
  if not digits then sign, digits = t:match('^([+-]?)([%d_]+)%.0+$') end
  if not digits or digits:find('^_') or digits:find('_$') or digits:find('__') then return nil end
  local v = tonumber((digits:gsub('_', '')))
  if sign == '-' then v = -v end
  return v
end

local NUMBER = '^%-?%d+%.?%d*[eE]?[%+%-]?%d*$'

-- A count at span `v` (nil: absent or null); false when it is no count vLLM reads (flags: a bool
-- reads as 1 or 0, where a bool is allowed).
local function count(s, v, flags)
  if not v then return nil end
  local raw = s:sub(v[1], v[2])
  if raw == 'null' then return nil end
  if raw == 'true' or raw == 'false' then
    if flags then return raw == 'true' and 1 or 0 end
    return false
  end
  local n
  if raw:sub(1, 1) == '"' then
    local text = read_string(s, v[1])
    n = text and int_text(text)
  elseif raw:match(NUMBER) then
    n = tonumber(raw)
  end
  if not n or n ~= n or n == math.huge or n == -math.huge or n ~= math.floor(n) then return false end
  return n
end

-- Prompts a value runs: a text one, token ids one, a list of texts or token-id lists one each.
local function prompts(s, v)
  if not v then return 0 end
  local c = s:sub(v[1], v[1])
  if c == '"' then return 1 end
  if c ~= '[' then return 0 end
  local i = skip_ws(s, v[1] + 1)
  local first = s:sub(i, i)
  if first == ']' then return 0 end
  if first:match('[%d%-]') then return 1 end
  local n = 0
  while i <= v[2] do
    local stop = skip_value(s, i)
    if not stop then return n + 1 end
    n, i = n + 1, skip_ws(s, stop)
    if s:sub(i, i) ~= ',' then break end
    i = skip_ws(s, i + 1)
  end
  return n
end

local function bad_count(h, field)
  local msg = '{"error":{"message":"' .. field .. ' must be an integer as vLLM reads it (n and best_of: '
    .. '>= 1)","type":"BadRequestError","param":"' .. field .. '","code":400}}'
  h:respond({[":status"] = "400", ["content-type"] = "application/json"}, msg)
end

-- The request's bound and units (sequences x prompts), or nil and the field vLLM would refuse.
local function reading(s, values, completions, missing)
  local bound
  if completions then
    bound = count(s, values.max_tokens, true)
    if bound == false then return nil, "max_tokens" end
    bound = bound or 16
  else
    local plain = count(s, values.max_tokens, true)
    if plain == false then return nil, "max_tokens" end
    local newer = count(s, values.max_completion_tokens, true)
    if newer == false then return nil, "max_completion_tokens" end
    bound = newer or plain or missing
  end
  local n = count(s, values.n, false)
  if n == false or (n and n < 1) or (n == nil and completions and values.n) then return nil, "n" end
  local best_of = count(s, values.best_of, false)
  if best_of == false or (best_of and best_of < 1) then return nil, "best_of" end
  local units = math.max(n or 1, best_of or 1)
  if completions then
    units = units * math.max(1, prompts(s, values.prompt_embeds) + prompts(s, values.prompt))
  end
  return bound, units
end

local function answer(h, cfg, status, action, message)
  local msg = '{"error":{"message":"' .. message .. '","type":"rate_limit_error","code":' .. status .. '}}'
  h:respond({
    [":status"] = tostring(status),
    ["content-type"] = "application/json",
    ["retry-after"] = tostring(cfg.retry_after or 30),
    ["x-lanewatch-degraded"] = action,
  }, msg)
end

-- `s` with the bound vLLM reads at most `per` (degrade_state.cap_max_tokens): a count over it, or
-- one vLLM does not read there, becomes `per`; a bound left unset or over it sets max_tokens.
local function capped(s, values, close, completions, per)
  local edits, after = {}, {}
  for _, key in ipairs({"max_tokens", "max_completion_tokens"}) do
    local v = values[key]
    local n = count(s, v, true)
    if v and (n == false or (n and n > per)) then
      edits[key], n = {v[1], v[2]}, per
    end
    after[key] = n or nil
  end
  local bound = after.max_tokens or (completions and 16) or nil
  if not completions and after.max_completion_tokens ~= nil then bound = after.max_completion_tokens end
  if bound == nil or bound > per then
    local v = values.max_tokens
    edits.max_tokens = v and {v[1], v[2]} or {close, close - 1}
  end
  local spans = {}
  for key, e in pairs(edits) do
    local text = tostring(math.floor(per))
    if e[2] < e[1] then -- no max_tokens key: one more member before the object closes
      text = (next(values) and ',' or '') .. '"max_tokens":' .. text
    end
    spans[#spans + 1] = {e[1], e[2], text}
  end
  table.sort(spans, function(a, b) return a[1] < b[1] end)
  local out, at = {}, 1
  for _, e in ipairs(spans) do
    out[#out + 1] = s:sub(at, e[1] - 1)
    out[#out + 1] = e[3]
    at = e[2] + 1
  end
  out[#out + 1] = s:sub(at)
  return table.concat(out)
end

-- The body to send on, or nil when the request was answered here: shed (its work lies in a
-- range of cfg.shed), over the cap (cfg.caps: the smallest counts) or a count vLLM refuses.
local function by_work(h, cfg, s, start)
  local values, close = top_level(s, start)
  if not values then return s end -- not an object: vLLM answers it 400 without work
  local path = (h:headers():get(":path") or ""):gsub('%?.*$', '')
  local completions = path:match('/completions$') ~= nil and path:match('/chat/completions$') == nil
  local bound, units = reading(s, values, completions, tonumber(cfg.missing) or 1000000)
  if not bound then
    bad_count(h, units)
    return nil
  end
  local work = bound * units
  for _, rule in pairs(cfg.shed or {}) do
    local lo, hi = tonumber(rule[2]) or 0, tonumber(rule[3]) or -1
    if work >= lo and (hi < 0 or work <= hi) then
      answer(h, cfg, 429, "shed", "shed by lanewatch degrade: class " .. literal(rule[1]))
      return nil
    end
  end
  local cap
  for _, entry in pairs(cfg.caps or {}) do
    local c = tonumber(entry[2])
    if c and (not cap or c < cap) then cap = c end
  end
  if not cap then return s end
  if units > cap then
    answer(h, cfg, 429, "cap_max_tokens", "this lane caps a request's work at " .. math.floor(cap)
      .. " tokens for now; its n (or best_of) x prompts ask for " .. math.floor(units)
      .. " sequences, more than the cap at one token each: ask for fewer, or retry later")
    return nil
  end
  return capped(s, values, close, completions, math.floor(cap / units))
end
"""
