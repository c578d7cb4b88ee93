/*
** fuzz_policy.c -- the policy sandbox (lua/ndplan/policy.lua, the guard in
** engine/bind/lsearch.c): any bytes run as a policy file's top level in a fresh sandbox,
** under a 50 ms deadline and a 16 MiB heap cap; a table of hooks that comes back has each
** hook called the way nd.search calls it (rank's answer through policy.rank).
**
** What aborts, besides a sanitizer report:
**  - a tripwire: every function of the real state that touches a file, a process, the
**    environment or a loader (io.*, os.execute/remove/rename/tmpname/getenv/exit, dofile,
**    loadfile, package searchers for other than ndplan's modules, ndplan.c.files, the
**    bundle's load, a nested search, debug's setters) is replaced by one that aborts;
**  - an effect outside the state: a file in the working folder (a fresh empty one), a child
**    process (a new one alive, or one waited for);
**  - a change the sandbox must not let through: a key of _G or of a standard library added,
**    removed or replaced, the string metatable's fields, a field of a loaded ndplan module.
** Code stuck inside one C call cannot be stopped before the guard's watchdog ends the
** process, so the harness refuses string patterns with more than 3 quantifiers on subjects
** over 64 bytes (a backtracking pattern is exponential; that limit is the harness's, not
** the sandbox's).
*/
#define _DEFAULT_SOURCE  /* mkdtemp */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "fuzz_lua.h"

static const char driver[] =
  "local policy = require 'ndplan.policy'\n"
  "local core = require 'ndplan.c.search'\n"
  "local getmt, traceback = debug.getmetatable, debug.traceback\n"
  "-- warm up what nd's functions load lazily, before the snapshot\n"
  "for _, k in ipairs({'json', 'yaml', 'grammar', 'units', 'files', 'cli'}) do local _ = nd[k] end\n"
  "for _, m in ipairs({'ndplan.config.model', 'ndplan.config.device', 'ndplan.estimate', 'ndplan.config.hfconfig',\n"
  "                    'ndplan.search', 'ndplan.block_plan'}) do require(m) end\n"
  "assert(nd.model('llama3.1-8b')); assert(nd.device('h100'))\n"
  "policy.sandbox()\n"
  "io.stderr = io.open('/dev/null', 'w')  -- the sandbox's print goes there\n"
  "local function trip(name) return function() fuzz_fail('sandbox escape: ' .. name) end end\n"
  "local function wire(t, tname, names)\n"
  "  for _, k in ipairs(names) do t[k] = trip(tname .. '.' .. k) end\n"
  "end\n"
  "wire(io, 'io', {'open', 'popen', 'lines', 'input', 'output', 'close', 'read', 'write', 'tmpfile'})\n"
  "wire(os, 'os', {'execute', 'exit', 'getenv', 'remove', 'rename', 'tmpname', 'setlocale'})\n"
  "wire(_G, '_G', {'dofile', 'loadfile', 'collectgarbage'})\n"
  "wire(debug, 'debug', {'sethook', 'setmetatable', 'setupvalue', 'upvaluejoin', 'setlocal',\n"
  "                      'setuservalue', 'getregistry', 'getupvalue', 'getlocal', 'debug'})\n"
  "wire(require('ndplan.c.files'), 'ndplan.c.files', {'mkdir', 'kind'})\n"
  "wire(require('ndplan.c.bundle'), 'ndplan.c.bundle', {'load'})\n"
  "wire(core, 'ndplan.c.search', {'run'})\n"
  "for i, s in ipairs(package.searchers) do\n"
  "  package.searchers[i] = function(name)\n"
  "    if not (package.preload[name] or name == 'ndplan' or name:match('^ndplan%.[%w_.]+$')\n"
  "            and not name:match('^ndplan%.c%.')) then fuzz_fail('sandbox escape: require ' .. name) end\n"
  "    return s(name)\n"
  "  end\n"
  "end\n"
  "-- the harness's limit on one C call: no costly pattern on a long subject (the real\n"
  "-- string table, so that s:find(p) is limited too)\n"
  "local gsub = string.gsub\n"
  "local function cheap(f)\n"
  "  return function(s, p, ...)\n"
  "    if type(s) == 'string' and type(p) == 'string' and #s > 64\n"
  "       and select(2, gsub(p, '[%*%+%-%?]', '')) > 3 then error('fuzz: pattern too costly') end\n"
  "    return f(s, p, ...)\n"
  "  end\n"
  "end\n"
  "for _, k in ipairs({'find', 'match', 'gmatch', 'gsub'}) do string[k] = cheap(string[k]) end\n"
  "local LIBS = {'string', 'table', 'math', 'io', 'os', 'coroutine', 'utf8', 'debug', 'package'}\n"
  "local function snapshot()\n"
  "  local s = {}\n"
  "  for k, v in next, _G do s['_G.' .. tostring(k)] = v end\n"
  "  for _, lib in ipairs(LIBS) do\n"
  "    for k, v in next, _G[lib] do s[lib .. '.' .. tostring(k)] = v end\n"
  "  end\n"
  "  for k, v in next, getmt('') do s['string metatable.' .. tostring(k)] = v end\n"
  "  return s\n"
  "end\n"
  "local function modules()\n"
  "  local s = {}\n"
  "  for name, m in next, package.loaded do\n"
  "    s['loaded.' .. name] = m\n"
  "    if type(m) == 'table' and name:match('^ndplan') then\n"
  "      for k, v in next, m do\n"
  "        if type(v) == 'function' then s[name .. '.' .. tostring(k)] = v end\n"
  "      end\n"
  "    end\n"
  "  end\n"
  "  return s\n"
  "end\n"
  "local before, mods = snapshot(), modules()\n"
  "local function check()\n"
  "  local now = snapshot()\n"
  "  for k, v in next, before do\n"
  "    if rawget(now, k) ~= v then fuzz_fail('the sandbox let ' .. k .. ' change') end\n"
  "  end\n"
  "  for k in next, now do\n"
  "    if rawget(before, k) == nil then fuzz_fail('the sandbox let ' .. k .. ' appear') end\n"
  "  end\n"
  "  local m = modules()\n"
  "  for k, v in next, mods do\n"
  "    if rawget(m, k) ~= v then fuzz_fail('the sandbox let ' .. k .. ' change') end\n"
  "  end\n"
  "end\n"
  "local row = {index = 1, step_time_s = 1.5, tokens_per_s = 1e5, mfu = 0.5, peak_memory_bytes = 5e10,\n"
  "             heaviest_stage = 0, fits = true, budget_bytes = 8e10,\n"
  "             strategy = {dp = 8, tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1, zero = 1,\n"
  "                         mbs = 1, mb = 1, sp = false, recompute = 'none'}}\n"
  "local function copy(t) local c = {} for k, v in next, t do c[k] = type(v) == 'table' and copy(v) or v end return c end\n"
  "return function(data)\n"
  "  local env = policy.sandbox()\n"
  "  local chunk = load(data, '=fuzz', 't', env)\n"
  "  if chunk then\n"
  "    local limits = {deadline = core.clock() + 0.05, heap = core.heap_bytes() + 16 * 2^20}\n"
  "    local ok, p = core.guard(limits, chunk)\n"
  "    if ok and type(p) == 'table' then\n"
  "      local hooks = {}\n"
  "      for _, h in ipairs(policy.HOOKS) do\n"
  "        local f = rawget(p, h)\n"
  "        if type(f) == 'function' then hooks[h] = f end\n"
  "      end\n"
  "      local opts = {top = 3, budget_bytes = 8e10, jobs = 1, policy = {price = 2}}\n"
  "      local out = {dir = 'out', write = function(name, text)\n"
  "        local plain, err = policy.plain_name(name)\n"
  "        if not plain then error(err, 2) end\n"
  "        return type(text) == 'string'\n"
  "      end}\n"
  "      local calls = {\n"
  "        {'setup', {devices = 8, global_batch = 64, seq_len = 4096, model = 'llama3.1-8b'}, opts},\n"
  "        {'admit', copy(row.strategy)}, {'objective', copy(row)}}\n"
  "      for _, c in ipairs(calls) do\n"
  "        if hooks[c[1]] then core.guard(limits, hooks[c[1]], table.unpack(c, 2)) end\n"
  "      end\n"
  "      if hooks.rank then\n"
  "        local limited = {rank = hooks.rank}\n"
  "        local okr, ranked = pcall(policy.rank, limited, {copy(row), copy(row)}, opts)\n"
  "        if okr and hooks.done then core.guard(limits, hooks.done, ranked, out) end\n"
  "      end\n"
  "    end\n"
  "  end\n"
  "  check()\n"
  "end\n";

static char workdir[] = "/tmp/ndplan-fuzz-policy-XXXXXX";
static int home_fd = -1, work_fd = -1;  /* libFuzzer's folder (relative paths), the policy's */

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerInitialize (int *argc, char ***argv) {
  (void)argc; (void)argv;
  nd_fuzz_lua_init("fuzz_policy", driver);
  /* an empty working folder for the policy: a file that appears there is an effect */
  home_fd = open(".", O_RDONLY | O_DIRECTORY);
  if (home_fd < 0 || !mkdtemp(workdir) || (work_fd = open(workdir, O_RDONLY | O_DIRECTORY)) < 0) {
    perror("fuzz_policy: working folder");
    abort();
  }
  return 0;
}

/* What says a process was started: the children alive (the kernel's list for this
   thread), and the page faults of the children waited for (any program that ran adds some).
   libFuzzer's own symbolizer is a child too, but it starts between inputs. */
typedef struct procs { char alive[4096]; long faults; } procs;

static void procs_now (procs *p) {
  char path[64];
  FILE *f;
  struct rusage ru;
  size_t n = 0;
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  f = fopen(path, "r");
  if (f) {
    n = fread(p->alive, 1, sizeof p->alive - 1, f);
    fclose(f);
  }
  p->alive[n] = '\0';
  getrusage(RUSAGE_CHILDREN, &ru);
  p->faults = ru.ru_minflt + ru.ru_majflt;
}

static void no_effects (const procs *before) {
  DIR *d = opendir(".");
  struct dirent *e;
  procs after;
  if (!d) abort();
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
      fprintf(stderr, "fuzz invariant violated: the policy made %s/%s\n", workdir, e->d_name);
      abort();
    }
  }
  closedir(d);
  procs_now(&after);
  if (strcmp(before->alive, after.alive) != 0 || before->faults != after.faults) {
    fprintf(stderr, "fuzz invariant violated: the policy started a process\n");
    abort();
  }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  procs before;
  if (fchdir(work_fd) != 0) abort();
  procs_now(&before);
  nd_fuzz_lua_run(data, size);
  no_effects(&before);
  if (fchdir(home_fd) != 0) abort();
  return 0;
}
