-- Shell launch scripts as data: an LPeg grammar that tokenises the bash a Megatron-style
-- launch script is written in (words, single and double quotes, `\` continuations,
-- comments, `NAME=value` assignments, `NAME=( ... )` arrays, $VAR / ${VAR} / ${VAR:-x} /
-- ${ARR[@]} references), a small evaluator that resolves plain assignments the way bash
-- would, and the `--flag value` options found in arrays and commands. Nothing is executed:
-- command substitutions and arithmetic stay unresolved, and using one as a flag's value is
-- an error the caller reports with the file, line and flag.
local lpeg = require "lpeg"
local files = require "ndplan.io.files"

local P, R, S, C, Cc, Ct, Cp = lpeg.P, lpeg.R, lpeg.S, lpeg.C, lpeg.Cc, lpeg.Ct, lpeg.Cp

local M = {}

---------------------------------------------------------------------------------------------
-- Tokens: {kind = "word", parts = {...}, pos, stop} | {kind = "op", op, pos} |
-- {kind = "nl", pos}. A word part is {lit = text, quoted = bool} or {var = NAME, default =
-- text|nil, quoted = bool} or {opaque = text} (a command substitution or arithmetic).
---------------------------------------------------------------------------------------------
local name = (R("az", "AZ") + P"_") * (R("az", "AZ", "09") + P"_")^0
local blank = S" \t" + P"\\\r\n" + P"\\\n"
local comment = P"#" * (1 - P"\n")^0
local newline = P"\r"^-1 * P"\n"
local special = S" \t\r\n;&|()<>'\"`$\\"

local function lit(quoted) return function(s) return {lit = s, quoted = quoted} end end
local function var(quoted)
  return function(n, default) return {var = n, default = default, quoted = quoted} end
end

-- $(( ... )) and $( ... ) with nested parentheses; `...` backquotes
local parens = P{"(" * ((1 - S"()") + lpeg.V(1))^0 * ")"}
local opaque = C(P"$" * P"(" * parens * P")" + P"$" * parens + P"`" * (1 - P"`")^0 * P"`")
  / function(s) return {opaque = s} end
local function variable(quoted)
  return P"${" * C(name) * (P"[" * S"@*" * P"]")^-1
           * (P":-" * C((1 - P"}")^0) + Cc(nil)) * P"}" / var(quoted)
       + P"$" * C(name + R"09" + S"@*#?$!") * Cc(nil) / var(quoted)
end
local single = P"'" * C((1 - P"'")^0) / lit(true) * P"'"
local dq_escape = P"\\" * C(S"$`\"\\") / lit(true) + P"\\\n" * Cc("") / lit(true)
local double = P'"' * (dq_escape + opaque + variable(true) + C((1 - S'"\\$`')^1) / lit(true)
                       + C(S"\\$") / lit(true))^0 * P'"'
local escape = P"\\" * C(1 - P"\n") / lit(true)
local bare = C((1 - special)^1) / lit(false)
local part = single + double + escape + opaque + variable(false) + bare + C(P"$") / lit(false)
local word = Cp() * Ct(part^1) * Cp()
  / function(pos, parts, stop) return {kind = "word", parts = parts, pos = pos, stop = stop} end
local redirect = R"09"^0 * (P">>" + S"<>") * (P"&" * (R"09"^1 + P"-"))^-1
local op = Cp() * C(redirect + P"&&" + P"||" + P";;" + S";&|()")
  / function(pos, o) return {kind = "op", op = o, pos = pos} end
local nl = Cp() * newline / function(pos) return {kind = "nl", pos = pos} end
local token = blank^1 + comment + nl + op + word
local script = Ct(token^0) * Cp()

-- Here-documents carry data, not arguments: their bodies become empty lines (so line
-- numbers stay right) before the script is tokenised.
local function blank_heredocs(text)
  local out, delim = {}, nil
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    if delim then
      if line:match("^%s*(.-)%s*$") == delim then delim = nil end
      out[#out + 1] = ""
    else
      out[#out + 1] = line
      delim = (" " .. line):match("[^<]<<%-?%s*['\"]?([%w_]+)['\"]?")  -- not <<<
    end
  end
  return table.concat(out, "\n") .. "\n"
end

-- tokens(text, name) -> array of tokens, the text they index | nil, "name:line:col: message"
function M.tokens(text, source)
  if text:find("<<", 1, true) then text = blank_heredocs(text) end
  local ok, toks, stop = pcall(script.match, script, text)
  if not ok then  -- LPeg's backtrack stack: $( and $(( nested past its limit
    return nil, string.format("%s: cannot read the shell script: %s (parentheses nested too "
                              .. "deep)", source, tostring(toks):gsub("%s*%(.*$", ""))
  end
  if stop <= #text then
    local line, col = files.line_col(text, stop)
    local what = text:sub(stop, stop) == "'" and "an unterminated single quote"
              or text:sub(stop, stop) == '"' and "an unterminated double quote"
              or string.format("unexpected '%s'", text:sub(stop, stop))
    return nil, string.format("%s:%d:%d: cannot read the shell script: %s", source, line, col, what)
  end
  return toks, text
end

---------------------------------------------------------------------------------------------
-- Evaluation: statements in order, assignments remembered, words expanded.
-- An expanded word is {text, line, missing = "$VAR" | nil}.
---------------------------------------------------------------------------------------------
local BOUNDARY = {boundary = true, text = ""}  -- between statements: options end there
local ASSIGN_PREFIX = {export = true, declare = true, ["local"] = true, readonly = true, typeset = true}

-- $(( ... )): integer arithmetic over numbers and resolved variables (+ - * / % and
-- parentheses), as in WORLD_SIZE=$(($GPUS_PER_NODE * $NNODES)); nil when it cannot be done.
local function arithmetic(expr, vars)
  local ok = true
  expr = expr:gsub("%$?{?([%a_][%w_]*)}?", function(n)
    local v = vars[n]
    if type(v) ~= "string" or not v:match("^%s*%-?%d+%s*$") then ok = false; return "0" end
    return "(" .. v .. ")"
  end)
  if not ok or not expr:match("^[%d%s%+%-%*/%%()]*$") then return nil end
  local pos = 1
  local function skip() pos = expr:match("^%s*()", pos) end
  local sum
  local function atom()
    skip()
    local c = expr:sub(pos, pos)
    if c == "(" then
      pos = pos + 1
      local v = sum()
      skip()
      if expr:sub(pos, pos) ~= ")" then error("paren") end
      pos = pos + 1
      return v
    elseif c == "-" then pos = pos + 1; return -atom()
    end
    local digits, after = expr:match("^(%d+)()", pos)
    if not digits then error("number") end
    pos = after
    return math.tointeger(tonumber(digits))
  end
  local function product()
    local v = atom()
    while true do
      skip()
      local o = expr:sub(pos, pos)
      if o ~= "*" and o ~= "/" and o ~= "%" then return v end
      pos = pos + 1
      local w = atom()
      if o ~= "*" and w == 0 then error("division by zero") end
      v = o == "*" and v * w or o == "/" and v // w or v % w
    end
  end
  function sum()
    local v = product()
    while true do
      skip()
      local o = expr:sub(pos, pos)
      if o ~= "+" and o ~= "-" then return v end
      pos = pos + 1
      local w = product()
      v = o == "+" and v + w or v - w
    end
  end
  local good, v = pcall(function()
    local x = sum()
    skip()
    if pos <= #expr then error("trailing") end
    return x
  end)
  return good and tostring(v) or nil
end

-- What expanding may produce, in all: a launch script's values are words and short
-- strings, so past these something doubles itself (A="$A $A", A=(${A[@]} ${A[@]})).
M.MAX_VALUE = 65536          -- bytes of one variable's value or one word
M.MAX_WORDS = 100000         -- words and array elements of the whole script
M.MAX_BYTES = 16 * 1048576   -- bytes of every expanded word together

local function expand(tok, vars, line, budget)
  local out = {{text = "", line = line}}
  local function check()  -- raises {message}; run() turns it into nil, "source:line: ..."
    local words, bytes = #out, 0
    for _, w in ipairs(out) do
      if #w.text > M.MAX_VALUE then
        error({message = string.format("a word expands past %d bytes", M.MAX_VALUE)}, 0)
      end
      bytes = bytes + #w.text
    end
    budget.words, budget.bytes = budget.words + words, budget.bytes + bytes
    if budget.words > M.MAX_WORDS or budget.bytes > M.MAX_BYTES then
      error({message = string.format("the script expands past %d words or %d bytes",
                                     M.MAX_WORDS, M.MAX_BYTES)}, 0)
    end
    return out
  end
  local function append(s) out[#out].text = out[#out].text .. s end
  for _, p in ipairs(tok.parts) do
    if p.lit then append(p.lit)
    elseif p.opaque then
      local value = p.opaque:match("^%$%(%((.*)%)%)$")
      value = value and arithmetic(value, vars)
      if value then append(value) else out[#out].missing = out[#out].missing or p.opaque end
    else
      local v = vars[p.var]
      if v == nil and p.default ~= nil then v = p.default end
      if v == nil then
        out[#out].missing = out[#out].missing or ("$" .. p.var)
      elseif type(v) == "table" then  -- an array: one word per element
        if #out + #v > M.MAX_WORDS then check() end
        for i, e in ipairs(v) do  -- elements keep the line they were written on
          if i == 1 then append(e.text); out[1].line = e.line
          else out[#out + 1] = {text = e.text, line = e.line} end
          out[#out].missing = out[#out].missing or e.missing
        end
      elseif p.quoted then append(v)
      else  -- unquoted: bash splits the value on blanks
        local first = true
        for w in v:gmatch("%S+") do
          if first then append(w); first = false else out[#out + 1] = {text = w, line = line} end
        end
      end
    end
  end
  return check()
end

local function assignment(tok)
  local first = tok.parts[1]
  if not (first and first.lit and not first.quoted) then return nil end
  local n, rest = first.lit:match("^([%a_][%w_]*)%+?=(.*)$")
  if not n then return nil end
  local parts = {{lit = rest, quoted = false}}
  for i = 2, #tok.parts do parts[#parts + 1] = tok.parts[i] end
  return n, {kind = "word", parts = parts, pos = tok.pos, stop = tok.stop}
end

-- run(text, source) -> {vars = {NAME = string|array}, words = {expanded word...}} | nil, err
-- `words` are every word of every command and every element of every array, in order.
function M.run(text, source)
  local toks, indexed = M.tokens(text, source)
  if not toks then return nil, indexed end
  local budget, at = {words = 0, bytes = 0}, 1  -- at: the token being read, for a cap's line
  local ok, r, err = pcall(M.evaluate, toks, indexed, source, budget, function(i) at = i end)
  if ok then return r, err end
  if type(r) ~= "table" then error(r, 0) end
  return nil, string.format("%s:%d: cannot read the shell script: %s", source,
                            (files.line_col(indexed, toks[at] and toks[at].pos or 1)), r.message)
end

-- evaluate(toks, text, source, budget, reading): run's statements in order; a cap raises
-- {message}, which run reports with the line of the token reading(i) last named
function M.evaluate(toks, text, source, budget, reading)
  local line_col = files.line_index(text)  -- once: each word's line by binary search
  local function line_of(pos) return (line_col(pos)) end
  local vars, words = {}, {}
  local i, at_start = 1, true
  while i <= #toks do
    local t = toks[i]
    reading(i)
    if t.kind == "nl" or t.kind == "op" then
      at_start = true  -- a new statement begins after a newline or an operator
      words[#words + 1] = BOUNDARY
      i = i + 1
      -- a redirection's target is a file name, not an argument
      if t.kind == "op" and t.op:match("[<>]$") and toks[i] and toks[i].kind == "word" then
        i = i + 1
      end
    else
      local n, value = assignment(t)
      local nxt = toks[i + 1]
      if at_start and n and nxt and nxt.kind == "op" and nxt.op == "(" and nxt.pos == t.stop
         and value.parts[1].lit == "" and #value.parts == 1 then
        -- NAME=( words... ): elements expanded now, as bash does
        local elements = {}
        i = i + 2
        while toks[i] and not (toks[i].kind == "op" and toks[i].op == ")") do
          if toks[i].kind == "word" then
            for _, w in ipairs(expand(toks[i], vars, line_of(toks[i].pos), budget)) do
              elements[#elements + 1] = w
              words[#words + 1] = w
            end
          end
          i = i + 1
        end
        if not toks[i] then
          local line = line_of(t.pos)
          return nil, string.format("%s:%d: cannot read the shell script: array %s is not closed", source, line, n)
        end
        vars[n] = elements
        words[#words + 1] = BOUNDARY
        i = i + 1
      elseif at_start and n then
        local ws = expand(value, vars, line_of(t.pos), budget)
        local parts = {}
        for _, w in ipairs(ws) do parts[#parts + 1] = w.text end
        vars[n] = not ws[1].missing and table.concat(parts, " ") or nil
        i = i + 1
      elseif at_start and t.parts[1] and t.parts[1].lit and ASSIGN_PREFIX[t.parts[1].lit]
             and #t.parts == 1 then  -- (a word "" has no part)
        i = i + 1  -- `export NAME=value`: the next words are assignments
      else
        at_start = false
        for _, w in ipairs(expand(t, vars, line_of(t.pos), budget)) do words[#words + 1] = w end
        i = i + 1
      end
    end
  end
  return {vars = vars, words = words}
end

-- options(words) -> array of {flag = "--name", values = {...}, line, missing}: every word
-- that starts with `--` and the words after it up to the next such word; `--name=value`
-- is split. Underscores in flag names become dashes (Megatron-SWIFT spells them so, §2.3).
function M.options(words)
  local out, current = {}, nil
  for _, w in ipairs(words) do
    if w.boundary then current = nil; goto next_word end
    local flag, value = w.text:match("^(%-%-[%w][%w_%-%.]*)=(.*)$")
    flag = flag or w.text:match("^%-%-[%w][%w_%-%.]*$")
    if flag then
      current = {flag = flag:gsub("_", "-"), values = {}, line = w.line}
      if value then current.values[1] = value; current.missing = w.missing end
      out[#out + 1] = current
    elseif current then
      current.values[#current.values + 1] = w.text
      if #current.values == 1 then current.missing = w.missing end
    end
    ::next_word::
  end
  return out
end

-- parse(text, source) -> {vars, options, last = {["--flag"] = option}} | nil, message
function M.parse(text, source)
  source = source or "(script)"
  local run, err = M.run(text, source)
  if not run then return nil, err end
  local options = M.options(run.words)
  local last = {}
  for _, o in ipairs(options) do last[o.flag] = o end
  return {vars = run.vars, options = options, last = last, source = source}
end

-- comment(s): s as the text of one comment line, in any of the formats the exporters write
-- (a shell, YAML or TOML comment ends at the line's end): every control character, a newline
-- first, shown as \NNN, so nothing after it becomes a live line. Model names are refused
-- with control characters on load (ndplan.model); this holds for any other text too.
function M.comment(s)
  return (tostring(s):gsub("%c", function(c) return ("\\%03d"):format(c:byte()) end))
end

-- quote(s): a shell word for s (bare when it is safe, else single-quoted; inside single
-- quotes the shell expands nothing, $( ), backquotes and newlines included)
function M.quote(s)
  s = tostring(s)
  if s:match("^[%w_%-%.,/:=+@%%]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

return M
