-- The REPL's help texts: help() lists the topics, help("nd.estimate") or help(nd.estimate)
-- prints one. Each entry: {topic, one-line summary, text}. The README has the full story.
return {
  {"nd.estimate", "price one strategy: memory per stage and step time", [[
nd.estimate{model=, device=, devices=, global_batch=, seq_len=, tp=, pp=, vpp=, cp=, ep=,
            etp=, dp=, sp=, zero=, mbs=, mb=, schedule=, precision=, flash_attention=,
            recompute=, recompute_modes=, selective_ops=, layer_recompute=, offload=,
            layout=, stage_layers=, max_mem=, costs=}
  -> result | nil, message
model and device: a bundled name, a file path, a table or an object (nd.model, nd.device).
Omitted degrees are 1; dp comes from the device count. recompute: "none", "selective",
"full", "per_layer" (each layer's mode under max_mem), "megatron". max_mem: bytes or a
size with its unit ("60GiB", "80GB"). The result has the fields of `ndplan estimate
--json`: step_time_s, tokens_per_s, mfu, hfu, peak_memory_bytes, heaviest_stage, fits,
budget_bytes, stages[i] (weights, grads, optimizer, activations, buffers, reserve, peak),
time_parts_s, strategy (resolved; passes straight back to nd.estimate), topology, warnings
(legal but wasteful choices).
The REPL prints a result as `ndplan estimate` does.
Errors: see help("errors").
  r = nd.estimate{model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                  seq_len = 8192, tp = 2, zero = 1}]]},
  {"nd.search", "every strategy of a job, priced and ranked", [[
nd.search{model=, device=, devices=, global_batch=, seq_len=, <dimension> = value | {list}
          | "auto", recompute=, max_mem=, jobs=, top=, policy=, policy_opts=, timeout=}
  -> ranked, info | nil, message, info
Dimensions: dp tp pp vpp cp ep etp sp zero mb mbs recompute; a value pins one, a list walks
those, "auto" (the default) walks the core's bounds. precision = {"bf16", "fp8:tensorwise"}
walks each recipe; dp_shard = "auto" | N | {list} walks HSDP's shard group (nil: all of dp);
dp_replicate = "auto" | M | {list} walks its replicas (the shard group dp / M).
ranked[i]: strategy, step_time_s,
tokens_per_s, mfu, peak_memory_bytes, memory_parts_bytes, time_parts_s, objective, rank.
info: tested, priced, fit, refused (label -> count), bounds, warnings, misses (nothing fits).
A pinned value no candidate can take returns nil, "pinned degrees refused (LABEL): rule".
The REPL prints ranked as the search's table and info as its counts line.
  best = nd.search{model = "llama3.1-8b", device = "h100", devices = 8, global_batch = 64,
                   seq_len = 8192, tp = {1, 2, 4}}]]},
  {"nd.model", "a model from a name, a config.json/YAML path or a table", [[
nd.model(x) -> model | nil, message (unknown name, unreadable file, bad field)
x: a bundled name (nd.models()), a Hugging Face config.json or YAML path, or a table of
config fields. Methods: m:params() (total, active, breakdown), m:layers() (runs of one
kind, with ffn_size on dense runs), m:spec() (the canonical fields), m:warnings() (what
was assumed). Fields: m.name, m.num_layers, m.mtp_layers.
  m = nd.model("deepseek-v3"); m:params().total]]},
  {"nd.models", "the bundled model names", [[
nd.models() -> sorted array of names (Tab completes them inside model = "...").]]},
  {"nd.device", "a device from a name, a YAML path or a table", [[
nd.device(x) -> device | nil, message
x: a bundled name (nd.devices()), a device YAML file, or a table ({base = "h100",
efficiency = {gemm = 0.7}}). In a table a plain number is SI (bytes, bytes/s, seconds); in a
file every quantity carries its unit (80GB, 400Gb/s, 10us). d:totable() gives the fields.]]},
  {"nd.devices", "the bundled device names", [[
nd.devices() -> sorted array of names (Tab completes them inside device = "...").]]},
  {"nd.grammar", "the small languages: sizes, rates, times, lists, recompute specs", [[
nd.grammar.size("80GiB") -> bytes. A memory size is bytes: GB = gb = 10^9, GiB = gib = 2^30;
  a bare number is refused ("did you mean 80GiB?").
nd.grammar.rate("400Gb/s") -> bytes/s (B bytes, b bits), time("2us") -> seconds,
  flop("1GFLOP"), dims("1,2,4" | "2..16" | "auto"), recompute("0-2:full,3-31:selective").
Each returns the value, or nil and "expected ... at column N of '...'".]]},
  {"nd.json", "JSON: decode, load_file, encode", [[
nd.json.decode(text, name), nd.json.load_file(path) -> value | nil, "file:line:col: message";
nd.json.encode(value) -> text.]]},
  {"nd.yaml", "YAML: decode, load_file", [[
nd.yaml.decode(text, name), nd.yaml.load_file(path) -> value | nil, "file:line:col: message"]]},
  {"policies", "search policies: hooks and the fields they see", [[
nd.search{..., policy = {setup = fn, admit = fn, objective = fn, rank = fn, done = fn}} or
`ndplan search --policy NAME|FILE --policy-opts k=v`. admit(candidate) -> false refuses it;
objective(estimate) -> the number to minimise (nil drops it). A headroom policy lowers
opts.budget_bytes in setup. The README ("Policies") lists every field each hook is given.]]},
  {"plots", "SVG charts and the HTML report", [[
require("ndplan.out.plots").stage_memory(r), .time_breakdown(r), .pipeline(r) -> SVG text;
require("ndplan.out.report").write(dir, {title=, summary_rows=, charts=, tables=}).]]},
  {"export", "trainer configs from a plan", [[
require("ndplan.export").export(name, plan) -> text, notes, rounded strategy; names:
megatron, torchtitan, deepspeed, mindformers, hyper. `ndplan export -f NAME ...` writes them.]]},
  {"errors", "which failures raise and which return nil, message", [[
Misuse raises: a call without its table, an unknown argument name, an argument of the wrong
Lua type (a string where a number is expected), a missing model or device, a bad dimension
value in nd.search. Fix the call.
An expected failure returns nil, message: what depends on the data - an unknown or unreadable
model or device, a value out of range (devices = 0, a size without a unit), a strategy the
rules refuse, a plan or search nothing fits. Check the first value:
  r, why = nd.estimate{...}; if not r then print(why) end]]},
  {"repl", "this prompt: Tab, history, printing", [[
Tab completes nd. names (and fields of any table: nd.grammar.si<Tab>), globals, and model and
device names inside model = "..." / device = "..." or nd.model("..."). Lines are kept in
$NDPLAN_HISTORY, else $XDG_STATE_HOME/ndplan/history, else ~/.ndplan_history (1000 lines;
NDPLAN_HISTORY= keeps none). An estimate prints as `ndplan estimate` does, a search's ranked
list as its table; print(x) or tostring(x) shows the table itself. help(topic) or help(nd.x).]]},
}
