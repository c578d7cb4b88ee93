-- Published measured training runs as test cases for the estimators: each table of
-- ../shared/validation (read from there, never copied) becomes a list of cases
-- {label, group, model, job, strategy, costs, measured_s}; metrics compare predictions.
local files = require "ndplan.io.files"

local M = {}

-- Tables and how each was run (facts from ../shared/validation/README.md).
M.TABLES = {
  {name = "narayanan2021_table1", file = "narayanan2021_table1.csv", what = "Narayanan 2021 Table 1"},
  {name = "narayanan2021_table2", file = "narayanan2021_table2.csv", what = "Narayanan 2021 Table 2"},
  {name = "korthikanti2022", file = "korthikanti2022.csv", what = "Korthikanti 2022 Table 5"},
  {name = "vtrain_multi", file = "vtrain_ground_truth_multi.csv", what = "vTrain multi-node"},
  {name = "vtrain_single", file = "vtrain_ground_truth_single.csv", what = "vTrain single-node"},
  {name = "modern_runs", file = "modern_runs.csv", what = "2024-25 stacks (modern_runs.csv)",
   per_group = true},
}

-- The default data folder: $NDPLAN_VALIDATION, else shared/ beside the checkout (as laid
-- out for CI).
function M.default_dir()
  local env = os.getenv("NDPLAN_VALIDATION")
  if env and env ~= "" then return env end
  local root = require("ndplan.c.bundle").root() or "."
  return root .. "/../shared/validation"
end

-- data_dir(dir) -> dir | nil, message when it holds no validation table
function M.data_dir(dir)
  dir = dir or M.default_dir()
  if require("ndplan.io.files").kind(dir) ~= "directory" then
    return nil, string.format("no validation data at %s (give --data DIR or set NDPLAN_VALIDATION)", dir)
  end
  return dir
end

-- read_csv(path) -> array of rows keyed by header (row._line: its record) | nil, message.
-- RFC 4180 quoting (modern_runs.csv's notes hold commas and quotes); a UTF-8 byte-order
-- mark on the header is dropped (the vTrain files have one, and CRLF line ends).
function M.read_csv(path)
  local text, err = files.read(path)
  if not text then return nil, err end
  text = text:gsub("^\239\187\191", "")
  local records, cells, cell, i, n, quoted = {}, {}, {}, 1, #text, false
  while i <= n do
    local ch = text:sub(i, i)
    if quoted then
      if ch == '"' then
        if text:sub(i + 1, i + 1) == '"' then cell[#cell + 1] = '"'; i = i + 1
        else quoted = false end
      else cell[#cell + 1] = ch end
    elseif ch == '"' then quoted = true
    elseif ch == "," then cells[#cells + 1] = table.concat(cell); cell = {}
    elseif ch == "\n" or ch == "\r" then
      if ch == "\r" and text:sub(i + 1, i + 1) == "\n" then i = i + 1 end
      cells[#cells + 1] = table.concat(cell); cell = {}
      if #cells > 1 or cells[1] ~= "" then records[#records + 1] = cells end
      cells = {}
    else cell[#cell + 1] = ch end
    i = i + 1
  end
  if #cell > 0 or #cells > 0 then cells[#cells + 1] = table.concat(cell); records[#records + 1] = cells end
  if quoted then return nil, path .. ": unterminated quoted field" end
  local header, rows = records[1], {}
  if not header then return nil, path .. ": no header row" end
  for r = 2, #records do
    local row = {_line = r}
    for k, name in ipairs(header) do row[name] = records[r][k] end
    rows[#rows + 1] = row
  end
  return rows
end

-- A Megatron GPT model of the validation runs: learned positions, LayerNorm, biases, 4h MLP.
local function gpt(layers, hidden, heads, vocab, seq)
  return {model_type = "gpt2", n_layer = layers, n_embd = hidden, n_head = heads,
          vocab_size = vocab, n_positions = seq, tie_word_embeddings = true,
          _name = string.format("gpt-%dx%d", layers, hidden)}
end

local function num(v) return tonumber(v) end
local function int(v) return math.tointeger(tonumber(v)) end

-- Megatron of 2021-22: dropout masks kept, no flash attention.
local MEGATRON_2021 = {dropout = 1}

local builders = {}

function builders.narayanan2021_table1(row)
  local vpp = int(row.vpp_chunks) or 1
  local costs = {dropout = 1}
  -- Megatron's "local" DDP (models >= 39B) reduces gradients after the backward pass
  if num(row.params_b) >= 39 then costs.dp_overlap = 0 end
  return {
    label = row.model, group = "all",
    model = gpt(int(row.layers), int(row.hidden), int(row.heads), int(row.vocab), int(row.seq_len)),
    job = {devices = int(row.gpus), global_batch = int(row.gbs), seq_len = int(row.seq_len)},
    strategy = {tp = int(row.tp), pp = int(row.pp), vpp = vpp, mbs = int(row.mbs),
                recompute = "full", flash_attention = false, precision = "fp16"},
    costs = costs, measured_s = num(row.iter_time_s_derived),
  }
end

function builders.narayanan2021_table2(row)
  local zero3 = row.scheme == "ZeRO-3"
  return {
    label = row.scheme .. " " .. row.model .. " " .. row.gpus, group = row.scheme,
    model = gpt(int(row.layers), int(row.hidden), int(row.heads), int(row.vocab), int(row.seq_len)),
    job = {devices = int(row.gpus), global_batch = int(row.gbs), seq_len = int(row.seq_len)},
    strategy = {tp = int(row.tp), pp = int(row.pp), mbs = int(row.mbs), zero = zero3 and 3 or 0,
                recompute = "full", flash_attention = false, precision = "fp16"},
    -- DeepSpeed ZeRO-3 of 2021 gathered and reduced with flat rings, fp16 gradients
    costs = zero3 and {dropout = 1, grad_bytes = 2, zero3_flat_ring = 1}
            or {dropout = 1, dp_overlap = 0},
    measured_s = num(row.iter_time_s_derived),
  }
end

function builders.korthikanti2022(row)
  if row.iter_time_s == nil or row.iter_time_s == "" then return nil end
  local rec = row.recompute == "selective" and "selective" or row.recompute == "full" and "full"
              or "none"
  return {
    label = row.model .. " " .. row.setting, group = row.setting,
    model = gpt(int(row.layers), int(row.hidden), int(row.heads), int(row.vocab), int(row.seq_len)),
    job = {devices = int(row.gpus), global_batch = int(row.gbs), seq_len = int(row.seq_len)},
    strategy = {tp = int(row.tp), pp = int(row.pp), vpp = int(row.interleave) or 1,
                mbs = int(row.mbs), sp = row.sequence_parallel == "true", recompute = rec,
                flash_attention = false, precision = "bf16"},
    costs = MEGATRON_2021, measured_s = num(row.iter_time_s),
  }
end

-- vTrain's runs: every config/validation/*.json at f8dda84 sets "use_gradient_bucket": false,
-- so gradients are all-reduced after the backward pass, none of it hidden.
local VTRAIN = {dropout = 1, dp_overlap = 0}

local function vtrain(row, group)
  local hidden, layers = int(row["hidden size"]), int(row["# layers"])
  return {
    label = string.format("%s tp%s pp%s dp%s mbs%s", group, row["tensor parallelism"],
                          row["pipeline parallelism"], row["data parallelism"], row["micro batch"]),
    group = group,
    model = gpt(layers, hidden, int(row["attention heads"]), 50257, int(row["sequence length"])),
    job = {devices = int(row["# GPUs"]), global_batch = int(row["global batch"]),
           seq_len = int(row["sequence length"])},
    strategy = {tp = int(row["tensor parallelism"]), pp = int(row["pipeline parallelism"]),
                dp = int(row["data parallelism"]), mbs = int(row["micro batch"]),
                recompute = "full", flash_attention = false, precision = "fp16"},
    costs = VTRAIN, measured_s = num(row["iteration time (ms)"]) / 1000,
  }
end

function builders.vtrain_multi(row)
  return vtrain(row, row["Parameters (billion)"] .. "B")
end

function builders.vtrain_single(row)
  return vtrain(row, string.format("%sgpu-h%s-l%s", row["# GPUs"], row["hidden size"],
                                   row["# layers"]))
end

---------------------------------------------------------------------------------------------
-- Memory: Korthikanti 2022 Figure 1 (GiB per GPU) and Figure 7 (% of the baseline)
---------------------------------------------------------------------------------------------
M.MEMORY_TABLES = {
  {name = "korthikanti2022_memory", file = "korthikanti2022.csv",
   what = "Korthikanti 2022 Fig. 1 and Fig. 7"},
  {name = "megatron_memory", file = "megatron_memory_logs.json",
   what = "Megatron-LM logs: max allocated and max reserved"},
}

local GIB = 2^30

-- Figure 1 counts the transformer layers only, so model states are read off a stage that
-- holds neither the embedding nor the head when there is one (pp > 2: stage 1).
local function body_stage(r)
  return #r.stages > 2 and r.stages[2] or r.stages[1]
end

local function korthikanti_strategy(row)
  local rec = row.recompute == "selective" and "selective" or row.recompute == "full" and "full"
              or "none"
  return {tp = int(row.tp), pp = int(row.pp), vpp = int(row.interleave) or 1, mbs = int(row.mbs),
          sp = row.sequence_parallel == "true", recompute = rec, flash_attention = false,
          precision = "bf16"}
end

-- One row gives up to three memory cases; each has measured and a predict(r, layer, base)
-- that reads the same quantity off an estimate r, or off one transformer layer priced
-- alone under the row's strategy and under the baseline (no SP, no recompute): Figure 7 is
-- a ratio of the per-layer formulas, without the embedding's mask or the logits.
local function korthikanti_memory(row, out)
  local base = korthikanti_strategy(row)
  base.sp, base.recompute = false, "none"
  local common = {
    group = row.model,
    model = gpt(int(row.layers), int(row.hidden), int(row.heads), int(row.vocab), int(row.seq_len)),
    job = {devices = int(row.gpus), global_batch = int(row.gbs), seq_len = int(row.seq_len)},
    strategy = korthikanti_strategy(row), baseline = base, costs = MEGATRON_2021,
  }
  local function add(quantity, measured, unit, predict)
    local c = {label = row.model .. " " .. row.setting .. " " .. quantity, quantity = quantity,
               measured = measured, unit = unit, predict = predict}
    for k, v in pairs(common) do c[k] = v end
    out[#out + 1] = c
  end
  if row.setting == "no_recompute" and num(row.params_opt_gib) then
    add("params+optimizer", num(row.params_opt_gib), "GiB", function(r)
      local st = body_stage(r)
      return (st.weights + st.grads + st.optimizer) / GIB
    end)
  end
  if num(row.activation_gib) then
    add("activations", num(row.activation_gib), "GiB", function(r)
      return r.stages[1].activations / GIB
    end)
  end
  if num(row.activation_pct_of_baseline) and row.setting ~= "no_recompute" then
    add("activations % of baseline", num(row.activation_pct_of_baseline), "%",
        function(_, layer, base)
          local mode = common.strategy.recompute
          return 100 * layer.activations[mode] / base.activations.none
        end)
  end
end

-- memory_cases(dir, name) -> array of memory cases | nil, message
function M.memory_cases(dir, name)
  if name == "megatron_memory" then return require("ndplan.fit.validate_modern").memory_cases(dir) end
  if name ~= "korthikanti2022_memory" then
    return nil, "unknown memory validation table '" .. tostring(name) .. "'"
  end
  local rows, err = M.read_csv(dir .. "/" .. M.MEMORY_TABLES[1].file)
  if not rows then return nil, err end
  local out = {}
  for _, row in ipairs(rows) do korthikanti_memory(row, out) end
  return out
end

-- run_memory(cases, device) -> cases with predicted and error_pct (nil when refused)
function M.run_memory(cases, device, stack)
  local nd = require "ndplan"
  local core = require "ndplan.c.estimate"
  local function price(c, dev, strategy)
    local args = {device = dev, model = c.model_obj, costs = c.costs, stack = M.stack_for(c, stack)}
    for k, v in pairs(strategy) do args[k] = v end
    for k, v in pairs(c.job) do args[k] = v end
    return nd.estimate(args)
  end
  for _, c in ipairs(cases) do
    c.model_obj = c.model_obj or assert(nd.model(c.model))
    local dev = c.device_name and require("ndplan.fit.validate_modern").device(c.device_name) or device
    local r, why = price(c, dev, c.strategy)
    local layer, lwhy, base, bwhy = true, nil, true, nil
    if c.baseline then  -- ratios of one layer priced alone (Korthikanti's Figure 7)
      layer, lwhy = core.layer(c.model_obj, dev, c.job, c.strategy, 0, c.costs)
      base, bwhy = core.layer(c.model_obj, dev, c.job, c.baseline, 0, c.costs)
    end
    if r and layer and base then
      c.predicted = c.predict(r, layer, base)
      c.error_pct = 100 * (c.predicted - c.measured) / c.measured
      c.refused = nil
    else
      c.predicted, c.error_pct, c.refused = nil, nil, why or lwhy or bwhy
    end
  end
  return cases
end

-- table_spec("NAME" or "NAME:PATTERN") -> name, pattern | nil, message. The pattern (a Lua
-- pattern) keeps only the rows whose group it matches, so a table can be split into a part
-- to calibrate on and a part to check, e.g. vtrain_single:^2gpu and vtrain_single:^[48]gpu.
-- The repetitions (*, +, -, ?) of a Lua pattern: each a single-character class followed by
-- one. A match backtracks over every way to share the group among them, so its work grows
-- as the group's length to that power: ('.-'):rep(30) never finished.
M.MAX_REPEATS = 3
local function repeats(pattern)
  local n, i, len = 0, 1, #pattern
  while i <= len do
    local c = pattern:sub(i, i)
    local nxt = i + 1
    if c == "%" then
      local k = pattern:sub(i + 1, i + 1)
      if k == "b" then nxt = i + 4          -- %bxy: no repetition after it
      elseif k == "f" then                   -- %f[set]: a frontier, no repetition
        nxt = (pattern:find("]", i + 4, true) or len) + 1
      else nxt = i + 2 end
    elseif c == "[" then                     -- a set: to its closing ] (one may come first)
      local j = i + 1
      if pattern:sub(j, j) == "^" then j = j + 1 end
      if pattern:sub(j, j) == "]" then j = j + 1 end
      while j <= len and pattern:sub(j, j) ~= "]" do j = j + (pattern:sub(j, j) == "%" and 2 or 1) end
      nxt = j + 1
    elseif c == "(" or c == ")" or (c == "^" and i == 1) then
      i = nxt
      goto continue
    end
    if pattern:sub(nxt, nxt):match("^[%*%+%-%?]$") then n, nxt = n + 1, nxt + 1 end
    i = nxt
    ::continue::
  end
  return n
end

function M.table_spec(spec)
  local name, pattern = tostring(spec):match("^([^:]+):(.*)$")
  name = name or tostring(spec)
  if pattern then
    local ok, err = pcall(string.find, "", pattern)
    if not ok then
      return nil, string.format("table '%s': bad group pattern '%s' (%s)", name, pattern,
                                tostring(err):gsub("^.-:%d+: ", ""))
    end
    local n = repeats(pattern)
    if n > M.MAX_REPEATS then  -- the match's work is bounded: group length ^ MAX_REPEATS
      return nil, string.format("table '%s': group pattern '%s' has %d repetitions (*, +, -, ?);"
                                .. " at most %d", name, pattern, n, M.MAX_REPEATS)
    end
  end
  return name, pattern
end

-- cases(dir, spec) -> array of cases of the table (its rows whose group matches the spec's
-- pattern) | nil, message
function M.cases(dir, spec)
  local name, pattern = M.table_spec(spec)
  if not name then return nil, pattern end
  local t
  for _, x in ipairs(M.TABLES) do if x.name == name then t = x end end
  if not t then return nil, "unknown validation table '" .. name .. "'" end
  local out = {}
  if name == "modern_runs" then
    local all, err = require("ndplan.fit.validate_modern").cases(dir)
    if not all then return nil, err end
    for _, c in ipairs(all) do
      if not pattern or c.group:find(pattern) then out[#out + 1] = c end
    end
  else
    local rows, err = M.read_csv(dir .. "/" .. t.file)
    if not rows then return nil, err end
    for _, row in ipairs(rows) do
      local c = builders[name](row)
      if c and (not pattern or c.group:find(pattern)) then out[#out + 1] = c end
    end
  end
  if #out == 0 then
    return nil, string.format("table '%s': no row's group matches '%s'", name, pattern)
  end
  return out
end

-- Ranks with ties averaged, for Spearman's correlation.
local function ranks(xs)
  local idx = {}
  for i = 1, #xs do idx[i] = i end
  table.sort(idx, function(a, b) return xs[a] < xs[b] end)
  local r, i = {}, 1
  while i <= #idx do
    local j = i
    while j < #idx and xs[idx[j + 1]] == xs[idx[i]] do j = j + 1 end
    for k = i, j do r[idx[k]] = (i + j) / 2 end
    i = j + 1
  end
  return r
end

-- spearman(a, b) -> rank correlation, nil for fewer than 3 pairs
function M.spearman(a, b)
  local n = #a
  if n < 3 then return nil end
  local ra, rb = ranks(a), ranks(b)
  local ma, mb = 0, 0
  for i = 1, n do ma, mb = ma + ra[i], mb + rb[i] end
  ma, mb = ma / n, mb / n
  local sab, saa, sbb = 0, 0, 0
  for i = 1, n do
    sab = sab + (ra[i] - ma) * (rb[i] - mb)
    saa = saa + (ra[i] - ma) ^ 2
    sbb = sbb + (rb[i] - mb) ^ 2
  end
  if saa == 0 or sbb == 0 then return nil end
  return sab / math.sqrt(saa * sbb)
end

-- The stack a case is priced with: `stack` when given; a modern run's own stack when a
-- profile of it is bundled -- STACK-YEAR (e.g. megatron-core-2024: that stack's releases
-- through that year) for the earliest such YEAR not before the run's release, else STACK
-- (the current releases); else none (the 2021-22 tables ran Megatron before Transformer
-- Engine: the device file alone, with each table's stated costs).
function M.stack_for(c, stack)
  if stack then return stack end
  if c.stack then
    local own, era, era_year = false, nil, nil
    for _, n in ipairs(require("ndplan.config.stack").names()) do
      if n == c.stack then own = true end
      local y = n:sub(1, #c.stack + 1) == c.stack .. "-" and tonumber(n:sub(#c.stack + 2))
      if y and c.year and y >= c.year and (not era_year or y < era_year) then
        era, era_year = n, y
      end
    end
    if era then return era end
    if own then return c.stack end
  end
  return "none"
end

-- run(cases, device, extra_costs, stack) -> cases with predicted_s, error_pct (nil when
-- refused). A case naming its own device (device_name) is priced on it.
function M.run(cases, device, extra_costs, stack)
  local nd = require "ndplan"
  for _, c in ipairs(cases) do
    local dev = c.device_name and require("ndplan.fit.validate_modern").device(c.device_name) or device
    local args = {device = dev, costs = {}, stack = M.stack_for(c, stack)}
    for k, v in pairs(c.strategy) do args[k] = v end
    for k, v in pairs(c.job) do args[k] = v end
    for k, v in pairs(c.costs or {}) do args.costs[k] = v end
    for k, v in pairs(extra_costs or {}) do args.costs[k] = v end
    c.model_obj = c.model_obj or assert(nd.model(c.model))
    args.model = c.model_obj
    local r, why = nd.estimate(args)
    if r then
      c.predicted_s = r.step_time_s
      c.error_pct = c.measured_s and 100 * (r.step_time_s - c.measured_s) / c.measured_s
      c.result = r
      c.refused = nil
    else
      c.predicted_s, c.error_pct, c.refused = nil, nil, why
    end
  end
  return cases
end

-- summary(cases) -> {n, refused, mape, bias, max_abs, spearman_min, groups = {name = rho},
-- by_group = {name = {n, mape, bias, max_abs, spearman}}}
function M.summary(cases)
  local s = {n = 0, refused = 0, sum = 0, max_abs = 0, groups = {}, by_group = {}, bias_sum = 0}
  local by = {}
  for _, c in ipairs(cases) do
    local g = s.by_group[c.group] or {n = 0, sum = 0, bias_sum = 0, max_abs = 0, refused = 0}
    s.by_group[c.group] = g
    if c.error_pct then
      g.n, g.sum, g.bias_sum = g.n + 1, g.sum + math.abs(c.error_pct), g.bias_sum + c.error_pct
      g.max_abs = math.max(g.max_abs, math.abs(c.error_pct))
      s.bias_sum = s.bias_sum + c.error_pct
      s.n = s.n + 1
      s.sum = s.sum + math.abs(c.error_pct)
      s.max_abs = math.max(s.max_abs, math.abs(c.error_pct))
      if c.predicted_s then  -- rank correlation: step times only
        by[c.group] = by[c.group] or {p = {}, m = {}}
        table.insert(by[c.group].p, c.predicted_s)
        table.insert(by[c.group].m, c.measured_s)
      end
    else s.refused, g.refused = s.refused + 1, g.refused + 1 end
  end
  s.mape = s.n > 0 and s.sum / s.n or nil
  s.bias = s.n > 0 and s.bias_sum / s.n or nil
  for _, g in pairs(s.by_group) do
    g.mape = g.n > 0 and g.sum / g.n or nil
    g.bias = g.n > 0 and g.bias_sum / g.n or nil
  end
  for g, v in pairs(by) do
    local rho = M.spearman(v.p, v.m)
    if rho then
      s.groups[g] = rho
      s.by_group[g].spearman = rho
      s.spearman_min = math.min(s.spearman_min or 1, rho)
    end
  end
  return s
end

return M
