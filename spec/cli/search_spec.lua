-- ndplan search as a user runs it: the table and counts, --json, -o files, -s configs,
-- exit codes, policies from files, determinism across -j, and Ctrl-C.
local R = dofile("spec/support/run.lua")
local cjson = require "cjson"

local base = {"search", "-m", "llama3.1-8b", "-A", "h100", "-d", "16", "-b", "64",
              "--seq-len", "4096"}
local function with(...)
  local a = {table.unpack(base)}
  for _, x in ipairs({...}) do a[#a + 1] = x end
  return a
end

local tempdir = R.tmpdir

local read = R.read

describe("ndplan search", function()
  it("prints the bounds, a ranked table and the counts line", function()
    local r = R.run(with("-t", "5", "-j", "2"))
    assert.equal(0, r.code)
    assert.matches("The search bounds TP up to 8", r.out)
    assert.matches("\nrank%s+dp%s+tp%s+pp%s+vpp%s+cp", r.out)
    assert.matches("recompute%s+step time%s+tokens/s%s+MFU%s+peak%s+headroom%s+stage", r.out)
    assert.matches("\n%s+1%s", r.out)
    assert.matches("\n%s+5%s", r.out)
    assert.not_matches("\n%s+6%s+%d", r.out)
    local tested, refused, priced, fit = r.out:match("(%d+) tested: (%d+) refused %b(), (%d+) priced, (%d+) fit")
    assert.is_truthy(tested)
    assert.is_true(tonumber(fit) <= tonumber(priced))
    assert.is_true(tonumber(tested) >= tonumber(refused))
    assert.equal("", r.err)  -- no progress line on a pipe
  end)

  it("prints the same bytes for -j 1 and -j 8", function()
    local a = R.run(with("-t", "50", "-j", "1", "--recompute", "auto", "--json"))
    local b = R.run(with("-t", "50", "-j", "8", "--recompute", "auto", "--json"))
    assert.equal(0, a.code)
    assert.equal(a.out, b.out)
    local c = R.run(with("-t", "50", "-j", "1", "--recompute", "auto"))
    local d = R.run(with("-t", "50", "-j", "3", "--recompute", "auto"))
    assert.equal(c.out, d.out)
  end)

  it("prints one ndplan.search/1 document with --json", function()
    local r = R.run(with("-t", "3", "--json"))
    assert.equal(0, r.code)
    local doc = cjson.decode(r.out)
    assert.equal("ndplan.search/1", doc.schema)
    assert.equal(3, #doc.results)
    for _, k in ipairs({"tested", "refused", "priced", "fit"}) do assert.is_number(doc.counts[k]) end
    assert.is_number(doc.refusals["over memory"])
    assert.is_number(doc.refusals["global batch"])
    for i, res in ipairs(doc.results) do
      assert.equal("ndplan.estimate/1", res.schema)
      assert.equal(i, res.rank)
      assert.is_number(res.step_time_s)
      assert.is_table(res.stages)
      assert.is_table(res.topology)
      assert.is_true(res.fits)
      if i > 1 then assert.is_true(doc.results[i - 1].step_time_s <= res.step_time_s) end
    end
  end)

  it("writes results.csv, memory_parts.csv, time_parts.csv and search.json into -o", function()
    local dir = tempdir()
    local r = R.run(with("-t", "4", "-o", dir, "-j", "2", "--all-rows"))
    assert.equal(0, r.code)
    local csv = assert(read(dir .. "/results.csv"))
    local lines = 0
    for _ in csv:gmatch("\n") do lines = lines + 1 end
    local priced = tonumber(r.out:match("(%d+) priced"))
    assert.equal(priced + 1, lines)  -- --all-rows: every priced candidate, and a header
    -- by default only the fitting ones
    local dir2 = tempdir()
    local r2 = R.run(with("-t", "4", "-o", dir2, "-j", "2"))
    local fit_lines = 0
    for _ in assert(read(dir2 .. "/results.csv")):gmatch("\n") do fit_lines = fit_lines + 1 end
    assert.equal(tonumber(r2.out:match("(%d+) fit")) + 1, fit_lines)
    assert.matches("^index,dp,tp,pp,vpp,cp,ep,etp,sp,zero,mbs,mb,recompute,step_time_s", csv)
    assert.matches(",false,", csv)
    assert.matches("^rank,stage,layers", read(dir .. "/memory_parts.csv"))
    assert.matches("^rank,part,seconds,share\n1,forward,", read(dir .. "/time_parts.csv"))
    assert.equal("ndplan.search/1", cjson.decode(read(dir .. "/search.json")).schema)
    os.execute("rm -rf " .. R.quote(dir))
  end)

  it("writes the fitting rows the step-time bound left to price, every row with --all-rows", function()
    -- issue 18: results.csv by default holds the priced fitting rows (the step-time cut
    -- applies); --all-rows prices without it, so it holds more fitting rows, and each
    -- default row is one of them, byte for byte
    local args = {"search", "-m", "llama3.1-70b", "-A", "h100", "-d", "64", "-b", "512",
                  "--seq-len", "4096", "--recompute", "auto", "-j", "1", "-t", "3"}
    local function csv_of(extra)
      local dir = tempdir()
      local a = {table.unpack(args)}
      a[#a + 1] = "-o"; a[#a + 1] = dir
      if extra then a[#a + 1] = extra end
      local r = R.run(a)
      assert.equal(0, r.code, r.err)
      local rows, fits = {}, 0
      local csv = assert(read(dir .. "/results.csv"))
      local header = csv:match("^[^\n]+")
      local col = 0
      for name in header:gmatch("[^,]+") do col = col + 1 if name == "fits" then break end end
      for line in csv:gmatch("[^\n]+") do
        if line ~= header then
          local f, i = nil, 0
          for v in line:gmatch("[^,]*") do i = i + 1 if i == col then f = v break end end
          if f == "true" then fits = fits + 1; rows[line:match("^%d+")] = line end
        end
      end
      os.execute("rm -rf " .. R.quote(dir))
      return r, rows, fits
    end
    local r1, rows1, fit1 = csv_of(nil)
    local r2, rows2, fit2 = csv_of("--all-rows")
    assert.equal(tonumber(r1.out:match("(%d+) fit")), fit1)
    assert.equal(tonumber(r2.out:match("(%d+) fit")), fit2)
    assert.is_true(tonumber(r1.out:match("(%d+) pruned by the step%-time bound")) > 0, r1.out)
    assert.is_nil(r2.out:match("[1-9]%d* pruned by the step%-time bound"), r2.out)
    assert.is_true(fit1 < fit2, string.format("%d default rows, %d with --all-rows", fit1, fit2))
    for index, line in pairs(rows1) do assert.equal(rows2[index], line) end
    -- the ranking is the same either way
    assert.equal(r1.out:match("\n(%s+1%s[^\n]+)"), r2.out:match("\n(%s+1%s[^\n]+)"))
  end)

  it("exits 3 and shows the nearest misses when nothing fits", function()
    local r = R.run(with("-M", "10GiB"))
    assert.equal(3, r.code)
    assert.matches("no strategy fits", r.out)
    assert.matches("nearest misses:\n  dp %d+ tp %d+ .-over by [%d%.]+ GiB", r.out)
    assert.matches("over memory %d+", r.out)
  end)

  it("honours -l: listed dimensions searched, the others pinned", function()
    local r = R.run(with("-l", "TP,PP", "--json", "-t", "1000"))
    assert.equal(0, r.code)
    local doc = cjson.decode(r.out)
    for _, res in ipairs(doc.results) do
      assert.equal(1, res.strategy.cp)
      assert.equal(1, res.strategy.mbs)
      assert.equal(0, res.strategy.zero)
    end
  end)

  it("reads a search configuration YAML, with the post-filter on dp", function()
    local path = R.tempfile([[
model: llama3.1-8b
seq_len: 4096
cluster: {num_nodes: 2, cards_per_node: 8, device_type: h100}
parallelism:
  tp: [1, 2]
  pp: auto
  cp: 1
  dp: [4, 8]
constraint: {global_batch_size: 64, memory_limit_gb: 70}
recompute: [off, full]
]], ".yaml")
    local r = R.run({"search", "-s", path, "--json", "-t", "1000"})
    local t = R.run({"search", "-s", path})
    os.remove(path)
    assert.equal(0, r.code)
    local doc = cjson.decode(r.out)
    assert.equal(16, doc.job.devices)
    assert.equal(64, doc.job.global_batch)
    assert.equal(70 * 2^30, doc.budget_bytes)
    assert.is_true(doc.counts.postfiltered > 0)
    for _, res in ipairs(doc.results) do
      local s = res.strategy
      assert.is_true(s.tp == 1 or s.tp == 2)
      assert.is_true(s.dp == 4 or s.dp == 8)
      assert.equal(1, s.cp)
      assert.is_true(s.recompute == "none" or s.recompute == "full")
    end
    assert.matches("Parallelism: dp=searched over %[4, 8%]; tp=searched over %[1, 2%]; pp=searched %(auto%)", t.out)
    assert.matches("cp=fixed 1 %(declared%)", t.out)
  end)

  it("names the file and key of a bad search configuration", function()
    local path = R.tempfile("cluster: {num_nodes: 2}\nparallelism: {tpp: 2}\n", ".yaml")
    local r = R.run({"search", "-s", path, "-m", "llama3.1-8b", "-b", "8"})
    os.remove(path)
    assert.equal(1, r.code)
    assert.matches("^ndplan: [^\n]*%.yaml: parallelism%.tpp: unknown dimension[^\n]*\n$", r.err)
  end)

  it("stops on a failing policy hook, naming the file and line", function()
    local path = R.tempfile("return {\n  admit = function(c)\n    return c.tp.x\n  end,\n}\n", ".lua")
    local r = R.run(with("--policy", path))
    os.remove(path)
    assert.equal(1, r.code)
    assert.matches("^ndplan: policy error in admit: [^\n]*" .. path:gsub("%p", "%%%0") .. ":3: ", r.err)
    assert.equal("", r.out)
  end)

  it("runs a policy file in a sandbox unless --unsafe-policy", function()
    local marker = os.tmpname()
    os.remove(marker)
    local path = R.tempfile(string.format(
      "local done\nreturn {objective = function(e) if not done then done = true; "
      .. "os.execute('touch %s') end return e.step_time_s end}\n", marker), ".lua")
    local r = R.run(with("--policy", path))
    assert.equal(1, r.code)
    assert.matches("policy error in objective: .*field 'execute'", r.err)
    assert.is_nil(io.open(marker))
    local req = R.tempfile("local s = require('socket')\nreturn {}\n", ".lua")
    r = R.run(with("--policy", req))
    assert.equal(1, r.code)
    assert.matches("policy sandbox: require 'socket' is not allowed", r.err)
    r = R.run(with("--policy", path, "--unsafe-policy"))
    assert.equal(0, r.code, r.err)
    assert.is_truthy(io.open(marker))
    os.remove(marker)
    os.remove(path)
    os.remove(req)
  end)

  it("stops a policy that loops forever with --timeout, and on Ctrl-C", function()
    local path = R.tempfile("return {objective = function(e) while true do end end}\n", ".lua")
    local r = R.run(with("--policy", path, "--timeout", "0.5"))
    assert.equal(1, r.code)
    assert.matches("^ndplan: policy error in objective: timed out", r.err)
    -- Ctrl-C once the loop runs, told by a marker on stderr: a fixed sleep raced a slow
    -- start (a signal before the host's handler takes the default action, with no message)
    local marked = R.tempfile("return {objective = function(e) print('ready') while true do end end}\n",
                              ".lua")
    local log = os.tmpname()
    r = R.sh(string.format("$NDPLAN search -m llama3.1-8b -d 8 -b 64 --policy %s 2>%s & pid=$!; "
                           .. "(sleep 30; kill -KILL $pid) 2>/dev/null & guard=$!; "
                           .. "i=0; until grep -q '^ready' %s || [ $i -ge 300 ]; "
                           .. "do sleep 0.1; i=$((i+1)); done; "
                           .. "kill -INT $pid; wait $pid; echo \"exit $?\"; kill $guard; cat %s >&2",
                           R.quote(marked), R.quote(log), R.quote(log), R.quote(log)))
    local code = tonumber(r.out:match("exit (%d+)"))
    assert.is_true(code ~= 0 and code ~= 137, r.err)  -- stopped by Ctrl-C, not the guard
    assert.matches("^ready\n", r.err)
    assert.matches("interrupted", r.err)
    os.remove(marked)
    os.remove(log)
    os.remove(path)
  end)

  it("runs a bundled example policy by name", function()
    local r = R.run(with("--policy", "cheapest", "--policy-opts", "price=2.5", "-t", "2"))
    assert.equal(0, r.code)
    assert.matches("policy cheapest", r.out)
    assert.matches("%$/Mtok", r.out)
  end)

  it("takes every named cost estimate takes, and refuses a bad one once, naming it", function()
    local r = R.run(with("--costs", "dp_overlap=0.5,offload_overlap=0.5"))
    assert.equal(0, r.code, r.err)
    r = R.run(with("--costs", "dp_overlap=3"))
    assert.equal(1, r.code)
    assert.matches("^ndplan: costs.dp_overlap: expected a number in %[0, 1%], got 3\n$", r.err)
  end)

  it("rejects bad values in one line", function()
    local r = R.run(with("--tp", "two"))
    assert.equal(2, r.code)
    assert.matches("^ndplan: %-%-tp: expected a non%-negative integer", r.err)
    local r2 = R.run({"search", "-m", "llama3.1-8b", "-d", "8"})
    assert.equal(2, r2.code)
    assert.matches("global%-batch%-size", r2.err)
  end)

  it("stops on Ctrl-C, exits non-zero and leaves earlier outputs intact", function()
    local dir = tempdir()
    local first = R.run({"search", "-m", "llama3.1-8b", "-d", "8", "-b", "8", "-o", dir, "-t", "2"})
    assert.equal(0, first.code)
    local before = read(dir .. "/results.csv")
    -- a long search (DeepSeek-V3 on 2048 GPUs, writing every row) interrupted early, once
    -- its walk runs: an admit hook marks the first candidate on stderr (a fixed sleep raced
    -- a slow start under ASan)
    local policy = R.tempfile("local seen\nreturn {admit = function() if not seen then seen = true "
                              .. "print('ready') end return true end}\n", ".lua")
    local log = os.tmpname()
    local r = R.sh(string.format(
      "$NDPLAN search -m deepseek-v3 -A h800 -d 2048 -b 4096 --recompute auto -j 2 -o %s "
      .. "--policy %s 2>%s & pid=$!; (sleep 120; kill -KILL $pid) 2>/dev/null & guard=$!; "
      .. "i=0; until grep -q '^ready' %s || [ $i -ge 1200 ]; do sleep 0.1; i=$((i+1)); done; "
      .. "kill -INT $pid; wait $pid; echo \"exit $?\"; kill $guard; cat %s >&2",
      R.quote(dir), R.quote(policy), R.quote(log), R.quote(log), R.quote(log)))
    os.remove(policy)
    os.remove(log)
    local code = tonumber(r.out:match("exit (%d+)"))
    assert.is_true(code ~= 0 and code ~= 137, r.out .. r.err)
    assert.matches("^ready\n", r.err)
    assert.matches("interrupted", r.err)
    assert.equal(before, read(dir .. "/results.csv"))
    local p = io.popen("ls " .. R.quote(dir))
    local listing = p:read("a")
    p:close()
    assert.not_matches("tmp", listing)
    os.execute("rm -rf " .. R.quote(dir))
  end)

  it("walks a list of recipes and HSDP's shard groups, shown as columns and in results.csv", function()
    local dir = tempdir()
    local r = R.run(with("--precision", "bf16,fp8:tensorwise", "--dp-shard", "auto", "--zero",
                         "0,1", "-t", "200", "-j", "2", "-o", dir, "--all-rows"))
    assert.equal(0, r.code, r.err)
    assert.matches("layout > precision > zero > dp_shard > sp", r.out)
    assert.matches("\nrank .* precision%s+dp_shard%s+recompute", r.out)
    local csv = assert(read(dir .. "/results.csv"))
    assert.matches("^index,[^\n]*,precision,dp_shard,layout\n", csv)
    local seen = {}
    for line in csv:gmatch("[^\n]+") do
      local dp, zero = line:match("^%d+,(%d+),%d+,%d+,%d+,%d+,%d+,%d+,%a+,(%d),")
      local prec, shard = line:match(",([%w:]+),(%d+),[%a_]+$")
      if not dp then goto header end
      dp, shard = tonumber(dp), tonumber(shard)
      assert.equal(0, dp % shard)
      if zero == "0" then assert.equal(dp, shard) end  -- ZeRO 0 shards nothing
      seen[prec] = true
      if shard < dp then seen.hsdp = true end
      if zero == "0" then seen.zero0 = true end
      ::header::
    end
    assert.is_true(seen.bf16 and seen["fp8:tensorwise"] and seen.hsdp and seen.zero0)
    os.execute("rm -rf " .. R.quote(dir))
    -- a listed recipe the device has no peak for, an unknown one
    local m = R.run(with("--precision", "bf16,fp8:mxfp8"))
    assert.equal(1, m.code)
    assert.matches("fp8:mxfp8 runs its GEMMs at mxfp8 and the device H100 has no mxfp8 peak", m.err)
    local u = R.run(with("--precision", "bf16,fp9"))
    assert.equal(2, u.code)
    assert.matches("^ndplan: %-%-precision: expected bf16, fp16, .* got 'fp9'", u.err)
  end)
end)
