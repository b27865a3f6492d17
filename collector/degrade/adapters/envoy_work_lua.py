"""The Lua that reads a request's work in Envoy, for the per-route script (envoy_lua.py). Pure text.

The script sheds a request whose work lies in a shed range (envoy_work.py puts the ranges on a
lane's routes). It reads the work as the gateway does (collector/common/request_reading.py):
the bound (chat: `max_completion_tokens` when not null, else `max_tokens`, both unset the
route's `missing`; completions: `max_tokens`, unset 16) x `n`, or `best_of` when larger (chat:
null `n` is 1; completions refuse it) x the prompts of a completions body (each `prompt_embeds`
entry, then text or token ids one, a list one each; at least one). A count is pydantic's lax
int: a JSON integer, an integral float, a string of one (spaces around, `_` between digits, a
`.0` tail), a bool for a bound only. Anything else, and an `n` or `best_of` below 1, is a 400
naming the field, as the gateway answers; a body that is no JSON object the walk reads goes on
unshed (vLLM answers it 400 without work). The last of a repeated top-level key counts, as
Python's JSON reader keeps it. Uses the JSON walk of envoy_lua.py (`skip_ws`, `skip_value`,
`read_string`, `literal`), which comes before it in the script.
"""

from __future__ import annotations

from typing import Final

__all__ = ["WORK_LUA"]

WORK_LUA: Final = r"""
-- The work a request asks for (collector/common/request_reading.py): each top-level key's last
-- value span; nil when the body is not an object the walk reads.
local function top_level(s, start)
  local i = skip_ws(s, start)
  if s:sub(i, i) ~= '{' then return nil end
  local values = {}
  i = skip_ws(s, i + 1)
  if s:sub(i, i) == '}' then return values end
  while true do
    if s:sub(i, i) ~= '"' then return nil end
    local key, after = read_string(s, i)
    if not key then return nil end
    i = skip_ws(s, after)
    if s:sub(i, i) ~= ':' then return nil end
    i = skip_ws(s, i + 1)
    local stop = skip_value(s, i)
    if not stop then return nil end
    values[key] = {i, stop - 1}
    i = skip_ws(s, stop)
    local c = s:sub(i, i)
    if c == '}' then
      if skip_ws(s, i + 1) <= #s then return nil end
      return values
    end
    if c ~= ',' then return nil end
    i = skip_ws(s, i + 1)
  end
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

-- The request's work, or nil and the field vLLM would refuse.
local function work_of(s, values, completions, missing)
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
  return bound * units
end

-- True when the request was answered here: shed (its work lies in a range of cfg.shed) or refused.
local function shed_by_work(h, cfg, s, start)
  local values = top_level(s, start)
  if not values then return false end -- not an object: vLLM answers it 400 without work
  local path = (h:headers():get(":path") or ""):gsub('%?.*$', '')
  local completions = path:match('/completions$') ~= nil and path:match('/chat/completions$') == nil
  local work, field = work_of(s, values, completions, tonumber(cfg.missing) or 1000000)
  if not work then
    bad_count(h, field)
    return true
  end
  for _, rule in pairs(cfg.shed) do
    local lo, hi = tonumber(rule[2]) or 0, tonumber(rule[3]) or -1
    if work >= lo and (hi < 0 or work <= hi) then
      local msg = '{"error":{"message":"shed by lanewatch degrade: class ' .. literal(rule[1])
        .. '","type":"rate_limit_error","code":429}}'
      h:respond({
        [":status"] = "429",
        ["content-type"] = "application/json",
        ["retry-after"] = tostring(cfg.retry_after or 30),
        ["x-lanewatch-degraded"] = "shed",
      }, msg)
      return true
    end
  end
  return false
end
"""
