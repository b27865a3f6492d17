"""The model rewrite of a shift, and a shed by work, through Envoy: a per-route Lua script. Pure.

Envoy picks a request's weighted cluster when it resolves the route, before the HTTP filters
run, and a `ClusterWeight`'s `typed_per_filter_config` is the most specific per-route config
the Lua filter (`envoy.filters.http.lua`) sees. So the script and its settings ride on the
faster lane's `ClusterWeight` only: a request that stays on its own lane's cluster never
runs it, and the listener's Lua filter has no code of its own.

The script buffers the body (at most `max_bytes`; a larger one is refused with 413, since the
faster lane would not serve the model it names; Envoy's own 413 for a body over the route's
buffer limit, sent while the script waits for the body, is answered with the same refusal),
walks the top-level JSON object without looking inside any value, and replaces only the
string value of a top-level `"model"` key: with its `model_map` entry, else the lane's first
model, unless the lane serves it already.
A UTF-8 BOM before the object is read past, and a lone surrogate escape reads as U+FFFD.
A body that is JSON but no object, or has no top-level `"model"` string, passes unchanged;
one that opens with `{` but does not walk, or is UTF-16/32, is refused with 400: a parser
at the faster lane might read a model in it.
Envoy sets `content-length` to the new body's length. Model names go to the script as JSON
string literals: the route file is YAML, which would read a bare `y` or `on` as a boolean.

The same script sheds by work: where its config has `shed` ranges (envoy_work.py puts them on a
lane's routes and cluster weights), it reads the request's work before any rewrite
(envoy_work_lua.py) and answers 429, `retry-after` and `x-lanewatch-degraded: shed` when the work
lies in one. A config without `default` asks no rewrite.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final

from lanewatch.collector.degrade_state.served_models import ServedModels

from .envoy_work_lua import WORK_LUA

__all__ = [
    "LUA_FILTER",
    "LUA_PER_ROUTE",
    "LUA_TYPE",
    "MODEL_REWRITE_LUA",
    "class_literal",
    "needs_rewrite",
    "rewrite_config",
    "work_config",
]

LUA_FILTER: Final = "envoy.filters.http.lua"
LUA_TYPE: Final = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"
LUA_PER_ROUTE: Final = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute"
SCRIPT_HEAD: Final = '-- lanewatch: rewrite the top-level JSON "model" of a shifted request'

MODEL_REWRITE_LUA: Final = (
    SCRIPT_HEAD
    + r"""
local ESC = {['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t'}

local function utf8(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
  end
  return string.char(0xF0 + math.floor(cp / 0x40000), 0x80 + math.floor(cp / 0x1000) % 0x40,
    0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local function hex4(s, i)
  local h = s:sub(i, i + 3)
  if not h:match("^%x%x%x%x$") then return nil end
  return tonumber(h, 16)
end

-- The JSON string starting at s[i] == '"': its decoded text and the index after it; nil if malformed.
local function read_string(s, i)
  local out, j = {}, i + 1
  while true do
    local k = s:find('["\\%c]', j)
    if not k then return nil end
    out[#out + 1] = s:sub(j, k - 1)
    local c = s:sub(k, k)
    if c == '"' then return table.concat(out), k + 1 end
    if c ~= '\\' then return nil end -- a raw control character
    local e = s:sub(k + 1, k + 1)
    if e == 'u' then
      local cp = hex4(s, k + 2)
      if not cp then return nil end
      j = k + 6
      -- A JSON parser reads a lone surrogate escape too (Python's keeps it): it stands for no
      -- character, so it decodes to U+FFFD here, and no model name or "model" key contains it.
      if cp >= 0xD800 and cp <= 0xDBFF then
        local lo = s:sub(j, j + 1) == '\\u' and hex4(s, j + 2)
        if lo and lo >= 0xDC00 and lo <= 0xDFFF then
          cp, j = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00), j + 6
        else
          cp = 0xFFFD
        end
      elseif cp >= 0xDC00 and cp <= 0xDFFF then
        cp = 0xFFFD
      end
      out[#out + 1] = utf8(cp)
    elseif ESC[e] then
      out[#out + 1], j = ESC[e], k + 2
    else
      return nil
    end
  end
end

-- The index after the JSON string starting at s[i] == '"', without decoding it; nil if unclosed.
local function skip_string(s, i)
  local j = i + 1
  while true do
    local k = s:find('["\\]', j)
    if not k then return nil end
    if s:byte(k) == 34 then return k + 1 end
    j = k + 2
  end
end

local function skip_ws(s, i)
  return s:find('[^ \t\r\n]', i) or #s + 1
end

-- The index after the JSON value at s[i] (any depth, brackets matched); nil if malformed.
local function skip_value(s, i)
  local c = s:sub(i, i)
  if c == '"' then return skip_string(s, i) end
  if c ~= '{' and c ~= '[' then
    local a, b = s:find('^[%w%.%+%-]+', i)
    return a and b + 1 or nil
  end
  local stack, j = {c}, i + 1
  while #stack > 0 do
    local k = s:find('["{}%[%]]', j)
    if not k then return nil end
    local d = s:sub(k, k)
    if d == '"' then
      j = skip_string(s, k)
      if not j then return nil end
    else
      if d == '{' or d == '[' then
        stack[#stack + 1] = d
      elseif stack[#stack] == (d == '}' and '{' or '[') then
        stack[#stack] = nil
      else
        return nil
      end
      j = k + 1
    end
  end
  return j
end

-- Calls visit(key, first, last) with each top-level member's value span of the object that starts
-- at s[start] (after a UTF-8 byte order mark, which JSON parsers read past); returns where the
-- object closes, nil when the body is not an object the walk reads. The model rewrite and the work
-- reading (envoy_work_lua.py) both walk the body with it.
local function each_member(s, start, visit)
  local i = skip_ws(s, start)
  if s:sub(i, i) ~= '{' then return nil end
  i = skip_ws(s, i + 1)
  if s:sub(i, i) == '}' then return i end
  while true do
    if s:sub(i, i) ~= '"' then return nil end
    local key, after = read_string(s, i)
    if not key then return nil end
    i = skip_ws(s, after)
    if s:sub(i, i) ~= ':' then return nil end
    i = skip_ws(s, i + 1)
    local stop = skip_value(s, i)
    if not stop then return nil end
    visit(key, i, stop - 1)
    i = skip_ws(s, stop)
    local c = s:sub(i, i)
    if c == '}' then
      if skip_ws(s, i + 1) <= #s then return nil end
      return i
    end
    if c ~= ',' then return nil end
    i = skip_ws(s, i + 1)
  end
end

-- The spans (first, last) of every top-level "model" string value, with its decoded text.
local function model_spans(s, start)
  local spans = {}
  local close = each_member(s, start, function(key, first, last)
    if key == 'model' and s:sub(first, first) == '"' then
      spans[#spans + 1] = {first, last, (read_string(s, first))}
    end
  end)
  if not close then return nil end
  return spans
end

local function literal(text)
  return (read_string(text, 1))
end

local function settings(h)
  local cfg = {}
  for k, v in pairs(h:filterContext()) do cfg[k] = v end
  return cfg
end

-- What a refusal says the script was there for: a shift's rewrite, or a shed or cap by work.
local function purpose(action)
  if action == "shift" then return action, "rewrite its model for the lane it was shifted to" end
  return action, "read its work for a lane that sheds or caps by work"
end

local function too_large(limit, action)
  local _, why = purpose(action)
  return '{"error":{"message":"request body over ' .. limit .. ' bytes: too large to ' .. why
    .. '","type":"invalid_request_error","code":413}}'
end

local BOM = "\239\187\191"

-- A body a JSON parser may read as an object though the walk above cannot: one that opens
-- with "{", or JSON in UTF-16 or UTF-32 (a NUL among its first 4 bytes, or their BOM).
local function maybe_object(s, start)
  if s:sub(skip_ws(s, start), skip_ws(s, start)) == '{' then return true end
  local head = s:sub(1, 4)
  return head:find("%z") ~= nil or head:sub(1, 2) == "\254\255" or head:sub(1, 2) == "\255\254"
end

local function unreadable(h)
  local msg = '{"error":{"message":"request body is not a JSON object in UTF-8 that lanewatch can read, '
    .. 'so its model cannot be rewritten for the lane it was shifted to",'
    .. '"type":"invalid_request_error","code":400}}'
  local head = {[":status"] = "400", ["content-type"] = "application/json"}
  head["x-lanewatch-degraded"] = "shift"
  h:respond(head, msg)
end

local function refuse(h, limit, action)
  local head = {[":status"] = "413", ["content-type"] = "application/json"}
  head["x-lanewatch-degraded"] = action
  h:respond(head, too_large(limit, action))
end

"""
    + WORK_LUA
    + r"""

function envoy_on_request(h)
  local cfg = settings(h)
  local shift = cfg.default ~= nil -- a model rewrite was asked; else only a shed or cap by work
  local action = shift and "shift" or (cfg.shed and "shed" or "cap_max_tokens")
  local limit = tonumber(cfg.max_bytes) or 0
  local length = tonumber(h:headers():get("content-length") or "")
  if length and length > limit then return refuse(h, limit, action) end
  -- Envoy answers a body over the route's buffer limit itself, with a plain-text 413, while this
  -- waits in body(): the mark tells envoy_on_response that such a 413 is Envoy's, to answer ours.
  h:streamInfo():dynamicMetadata():set("lanewatch", "buffering", limit)
  h:streamInfo():dynamicMetadata():set("lanewatch", "action", action)
  local body = h:body()
  h:streamInfo():dynamicMetadata():set("lanewatch", "buffering", 0)
  if not body then return end
  local n = body:length()
  if n > limit then return refuse(h, limit, action) end
  local s = body:getBytes(0, n)
  local start = s:sub(1, 3) == BOM and 4 or 1
  local read = s
  if cfg.shed or cfg.caps then
    s = by_work(h, cfg, s, start)
    if not s then return end -- answered here
  end
  if not shift then
    if s ~= read then body:setBytes(s) end
    return
  end
  local spans = model_spans(s, start)
  -- Never on to the other lane un-rewritten when a parser there could read a model in it.
  if not spans and maybe_object(s, start) then return unreadable(h) end
  if not spans or #spans == 0 then
    if s ~= read then body:setBytes(s) end
    return
  end
  local serves, map = {}, {}
  for _, m in pairs(cfg.serves or {}) do serves[literal(m)] = true end
  for _, pair in pairs(cfg.map or {}) do map[literal(pair[1])] = pair[2] end
  local out, at, changed = {}, 1, false
  for _, span in ipairs(spans) do
    local requested = span[3]
    if requested and not serves[requested] then
      out[#out + 1] = s:sub(at, span[1] - 1)
      out[#out + 1] = map[requested] or cfg.default
      at, changed = span[2] + 1, true
    end
  end
  if not changed then
    if s ~= read then body:setBytes(s) end
    return
  end
  out[#out + 1] = s:sub(at)
  body:setBytes(table.concat(out))
end

function envoy_on_response(h)
  if h:headers():get(":status") ~= "413" then return end
  local mark = h:streamInfo():dynamicMetadata():get("lanewatch")
  local limit = mark and tonumber(mark.buffering) or 0
  if limit <= 0 then return end -- an upstream's 413, or none of ours
  local action = type(mark.action) == "string" and mark.action or "shift"
  h:headers():replace("content-type", "application/json")
  h:headers():replace("x-lanewatch-degraded", action)
  h:body():setBytes(too_large(limit, action))
end
"""
)


def _literal(name: str) -> str:
    return json.dumps(name, ensure_ascii=True)


def needs_rewrite(source: ServedModels | None, target: ServedModels | None) -> bool:
    """A request moved from `source` to `target` may need another model: the target declares its
    models, and the source does not, or serves one the target does not."""
    if target is None or not target.models:
        return False
    return source is None or not source.models or not set(source.models) <= set(target.models)


def rewrite_config(target: ServedModels, max_bytes: int) -> dict[str, Any]:
    """The Lua filter's per-route config (a `LuaPerRoute`) that asks `target` for a model it serves."""
    return {
        "@type": LUA_PER_ROUTE,
        "source_code": {"inline_string": MODEL_REWRITE_LUA},
        "filter_context": {
            "default": _literal(target.models[0]),
            "serves": [_literal(m) for m in target.models],
            "map": [[_literal(k), _literal(v)] for k, v in sorted(target.model_map.items())],
            "max_bytes": max_bytes,
        },
    }


def work_config(
    config: dict[str, Any] | None,
    sheds: list[list[Any]],
    caps: list[list[Any]],
    max_bytes: int,
    retry_after_s: int,
    missing: int,
) -> dict[str, Any]:
    """`config` (a rewrite's, or None) that also sheds a work in `sheds` ([class literal, min, max or
    -1, owner lane] each) with 429 and `retry_after_s`, and bounds the work by the smallest of `caps`
    ([owner lane, cap] each); `missing`: an unset chat bound's count."""
    out: dict[str, Any] = {
        "@type": LUA_PER_ROUTE,
        "source_code": {"inline_string": MODEL_REWRITE_LUA},
        "filter_context": {"max_bytes": max_bytes},
    }
    if config is not None:
        out = copy.deepcopy(config)
    ctx: dict[str, Any] = out["filter_context"]
    if sheds:
        ctx["shed"] = sheds
    if caps:
        ctx["caps"] = caps
    ctx["retry_after"] = retry_after_s
    ctx["missing"] = missing
    ctx["max_bytes"] = max(int(ctx.get("max_bytes", 0)), max_bytes)
    return out


def class_literal(name: str) -> str:
    """A class name as the script reads it: a JSON string literal (YAML would read `on` as a bool)."""
    return _literal(name)
