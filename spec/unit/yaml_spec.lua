-- ndplan.yaml: the libyaml binding and its Lua wrapper.
require "ndplan"
local yaml = require "ndplan.io.yaml"

local function decode(text) return yaml.decode(text, "t.yaml") end

local function decode_error(text)
  local v, err = decode(text)
  assert.is_nil(v)
  assert.is_string(err)
  return err
end

describe("yaml.decode", function()
  describe("scalars (YAML 1.2 core schema)", function()
    it("resolves integers as Lua integers", function()
      local v = decode("a: 1\nb: -5\nc: +3\nd: 0x1F\ne: 0o17\nf: 007\n")
      assert.same({a = 1, b = -5, c = 3, d = 31, e = 15, f = 7}, v)
      for _, k in ipairs{"a", "b", "c", "d", "e", "f"} do
        assert.equal("integer", math.type(v[k]), k)
      end
    end)

    it("accepts the int64 limits exactly", function()
      local v = decode("max: 9223372036854775807\nmin: -9223372036854775808\n")
      assert.equal(math.maxinteger, v.max)
      assert.equal(math.mininteger, v.min)
    end)

    it("resolves floats, including .inf and .nan", function()
      local v = decode("a: 1.5\nb: 1e3\nc: .5\nd: -.inf\ne: .Inf\nf: .nan\ng: 2.\n")
      assert.equal(1.5, v.a)
      assert.equal("float", math.type(v.b))
      assert.equal(1000, v.b)
      assert.equal(0.5, v.c)
      assert.equal(-math.huge, v.d)
      assert.equal(math.huge, v.e)
      assert.is_true(v.f ~= v.f)
      assert.equal(2.0, v.g)
    end)

    it("resolves booleans in the three core spellings only", function()
      local v = decode("a: true\nb: False\nc: TRUE\nd: yes\ne: on\n")
      assert.same({a = true, b = false, c = true, d = "yes", e = "on"}, v)
    end)

    it("keeps quoted and block scalars as strings", function()
      local v = decode("a: '1'\nb: \"true\"\nc: 'null'\nd: |\n  0x10\ne: 1.2.3\nf: 12abc\n")
      assert.same({a = "1", b = "true", c = "null", d = "0x10\n", e = "1.2.3", f = "12abc"}, v)
    end)

    it("honours the core tags", function()
      local v = decode("a: !!str 123\nb: !!float 1\nc: !!int '42'\nd: ! 12\n")
      assert.equal("123", v.a)
      assert.equal("float", math.type(v.b))
      assert.equal(42, v.c)
      assert.equal("12", v.d)
    end)
  end)

  describe("null", function()
    it("leaves a mapping key absent", function()
      local v = decode("a: ~\nb: null\nc:\nd: 1\n")
      assert.same({d = 1}, v)
    end)

    it("is yaml.null inside sequences, so arrays keep their length", function()
      local v = decode("[1, ~, null, 4]")
      assert.equal(4, #v)
      assert.equal(yaml.null, v[2])
      assert.equal(yaml.null, v[3])
      assert.equal(4, v[4])
    end)

    it("is the value of an empty or null document", function()
      assert.equal(yaml.null, decode(""))
      assert.equal(yaml.null, decode("# only a comment\n"))
      assert.equal(yaml.null, decode("~"))
    end)

    it("is the same value as cjson.null", function()
      assert.equal(require("cjson").null, yaml.null)
    end)
  end)

  describe("collections", function()
    it("builds nested mappings and sequences", function()
      local v = decode([[
model:
  layers: 32
  heads: [32, 8]
  parts:
    - name: attn
      ratio: 0.5
    - {name: mlp, ratio: 1}
]])
      assert.same({model = {layers = 32, heads = {32, 8},
                            parts = {{name = "attn", ratio = 0.5}, {name = "mlp", ratio = 1}}}}, v)
    end)

    it("resolves keys like values", function()
      local v = decode("1: a\n'1': b\ntrue: c\n")
      assert.equal("a", v[1])
      assert.equal("b", v["1"])
      assert.equal("c", v[true])
    end)

    it("copies aliases, so changing one copy leaves the other alone", function()
      local v = decode("a: &x {n: 1, l: [1, 2]}\nb: *x\nc: &s hello\nd: *s\n")
      assert.same(v.a, v.b)
      assert.are_not.equal(v.a, v.b)
      v.b.l[1] = 99
      assert.equal(1, v.a.l[1])
      assert.equal("hello", v.d)
    end)
  end)

  describe("errors", function()
    it("reports malformed YAML with name:line:col", function()
      local err = decode_error("a: 1\n b: 2\n")
      assert.matches("^t%.yaml:2:3: ", err)
    end)

    it("reports bad indentation in a block mapping", function()
      local err = decode_error("top:\n  a: 1\n    b: 2\n")
      assert.matches("^t%.yaml:3:%d+: ", err)
    end)

    it("reports an unclosed flow sequence with its context", function()
      local err = decode_error("a: [1, 2\nb: 3\n")
      assert.matches("^t%.yaml:2:%d+: .*flow sequence at line 1", err)
    end)

    it("refuses duplicate keys, naming the second one", function()
      assert.equal("t.yaml:3:1: duplicate key 'a'", decode_error("a: 1\nb: 2\na: 3\n"))
      assert.equal("t.yaml:3:3: duplicate key 'x'", decode_error("m:\n  x: 1\n  x: 2\n"))
    end)

    it("counts a null value when checking for duplicates", function()
      assert.equal("t.yaml:2:1: duplicate key 'a'", decode_error("a: ~\na: 1\n"))
    end)

    it("refuses integers that overflow 64 bits", function()
      assert.equal("t.yaml:1:4: integer '9223372036854775808' does not fit in 64 bits",
                   decode_error("a: 9223372036854775808\n"))
      assert.matches("^t%.yaml:2:6: integer '%-9223372036854775809'",
                     decode_error("a: 1\nbig: -9223372036854775809\n"))
      assert.matches("^t%.yaml:1:3: integer '0x10000000000000000'",
                     decode_error("- 0x10000000000000000\n"))
    end)

    it("refuses more than one document", function()
      assert.matches("^t%.yaml:3:1: more than one document", decode_error("--- 1\n...\n--- 2\n"))
    end)

    it("refuses undefined aliases", function()
      assert.matches("^t%.yaml:1:4: undefined alias '%*nope'", decode_error("a: *nope\n"))
    end)

    it("stops alias bombs", function()
      local lines = {"a: &a [x, x, x, x, x, x, x, x, x, x]"}
      for i = 2, 9 do
        local me, prev = string.char(96 + i), string.char(95 + i)
        lines[i] = string.format("%s: &%s [%s]", me, me, string.rep("*" .. prev, 10, ", "))
      end
      assert.matches("aliases expand to more than 100000 nodes",
                     decode_error(table.concat(lines, "\n")))
    end)

    it("refuses merge keys, unknown tags and non-scalar keys", function()
      assert.matches("merge keys", decode_error("base: &b {x: 1}\nd:\n  <<: *b\n"))
      assert.matches("unsupported tag 'tag:yaml.org,2002:python/object'",
                     decode_error("a: !!python/object foo\n"))
      assert.matches("unsupported tag '!custom'", decode_error("a: !custom 1\n"))
      assert.matches("mapping keys are not supported", decode_error("? {a: 1}\n: 2\n"))
      assert.matches("null key", decode_error("~: 1\n"))
      assert.matches("NaN key", decode_error(".nan: 1\n"))
      assert.matches("is not a valid !!int", decode_error("a: !!int abc\n"))
    end)

    it("refuses absurd nesting instead of overflowing the C stack", function()
      assert.matches("nesting deeper than 200 levels",
                     decode_error(string.rep("[", 300) .. string.rep("]", 300)))
    end)

    it("reports invalid UTF-8 with a position", function()
      assert.matches("^t%.yaml:2:%d+: ", decode_error("a: 1\nb: \255\254\n"))
    end)

    it("uses (yaml) when no name is given", function()
      local _, err = yaml.decode("a: [")
      assert.matches("^%(yaml%):%d+:%d+: ", err)
    end)

    it("raises on a non-string argument (misuse)", function()
      assert.has_error(function() yaml.decode(42) end)
      assert.has_error(function() yaml.load_file() end)
    end)
  end)

  describe("marks", function()
    it("gives line:col of every key and element when asked", function()
      local v, marks = yaml.decode("a:\n  b: 1\n  c: [1, 2]\n", "m.yaml", true)
      assert.equal("1:1", marks[v].a)
      assert.equal("2:3", marks[v.a].b)
      assert.equal("3:10", marks[v.a.c][2])
    end)
  end)
end)

describe("yaml.load_file", function()
  it("returns nil and a message for a missing file", function()
    local v, err = yaml.load_file("/nonexistent/dir/x.yaml")
    assert.is_nil(v)
    assert.equal("/nonexistent/dir/x.yaml: No such file or directory", err)
  end)

  it("names the file in syntax errors", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("ok: 1\nbad: [\n")
    f:close()
    local v, err = yaml.load_file(path)
    os.remove(path)
    assert.is_nil(v)
    assert.equal(path .. ":3:1:", err:sub(1, #path + 5))
  end)

  it("loads a bundled device file", function()
    local text, name = require("ndplan.c.bundle").read("examples/devices/h100.yaml")
    local v = assert(yaml.decode(text, name))
    assert.equal("H100", v.name)
    assert.equal(989, v.peak_tflops.bf16)
  end)
end)
