-- YAML through ndplan's own libyaml binding (ndplan.c.yaml): one document per file, the
-- YAML 1.2 core schema, errors that name the file, line and column. YAML is data only:
-- no tags beyond the core ones, nothing is ever executed.
--
-- Values: mappings are tables, sequences arrays. A null in a mapping leaves the key absent;
-- a null in a sequence, or a whole null document, is `M.null` (the same light userdata as
-- cjson.null). Aliases are deep copies of their anchor (bounded, so a "billion laughs"
-- document fails instead of exhausting memory); merge keys (`<<`) are refused.
local cyaml = require "ndplan.c.yaml"
local files = require "ndplan.io.files"

local M = {}

M.null = cyaml.null

-- decode(text [, name [, with_marks]]) -> value [, marks] | nil, "name:line:col: message"
-- With `with_marks`, `marks[container][key]` is the "line:col" where that key (or array
-- element) appears, for messages about values that parsed but mean nothing.
function M.decode(text, name, with_marks)
  if type(text) ~= "string" then
    error("yaml.decode: expected a string, got " .. type(text), 2)
  end
  return cyaml.decode(M.strip_bom(text), name or "(yaml)", with_marks)
end

-- strip_bom(text) -> text without a leading UTF-8 byte order mark (editors on Windows write
-- one; YAML 1.2 and RFC 8259 parsers may ignore it, ndplan does)
function M.strip_bom(text)
  if text:sub(1, 3) == "\239\187\191" then return text:sub(4) end
  return text
end

-- load_file(path [, with_marks]) -> value [, marks] | nil, message
function M.load_file(path, with_marks)
  if type(path) ~= "string" then
    error("yaml.load_file: expected a path, got " .. type(path), 2)
  end
  local text, err = files.read(path)
  if not text then return nil, err end
  return cyaml.decode(M.strip_bom(text), path, with_marks)
end

return M
