-- runfix for Neovim: starts `runfix serve` for the buffers of the languages it runs (Python,
-- and those of Jupyter kernels: R, shell, TypeScript/JavaScript, Julia) and adds user commands.
-- The server does the work; this file only starts it, finds it again, and sends commands.
-- Neovim 0.11+: vim.lsp.config/vim.lsp.enable; 0.8+: vim.lsp.start; 0.7: vim.lsp.start_client.

local M = {}

M.defaults = {
  cmd = { "runfix", "serve" },
  -- Python runs in the folder's Python; the others in their Jupyter kernel (IRkernel, bash_kernel,
  -- Deno's, IJulia), which the server says how to install where there is none. Lua is left
  -- out (Neovim's own config is Lua): add "lua" where a Lua kernel (xeus-lua) is installed.
  filetypes = { "python", "r", "sh", "bash", "typescript", "javascript", "julia" },
  root_markers = { "pyproject.toml", ".git", ".venv" },
  -- Server settings (see `:help runfix-settings`): sent as initializationOptions and
  -- answered for workspace/configuration (section "runfix").
  settings = {},
}

M.config = vim.deepcopy(M.defaults)
M.states = {} -- folder uri -> { state = ..., executor = ... }, from runfix/status

local NAME = "runfix"

local function notify(message, level)
  vim.notify("runfix: " .. message, level or vim.log.levels.INFO)
end

--- The folder a file belongs to: the nearest parent with a root marker, else its directory.
function M.root_dir(path)
  local dir = vim.fn.fnamemodify(path, ":p:h")
  local home = vim.loop.os_homedir()
  local current = dir
  while current and current ~= "" do
    for _, marker in ipairs(M.config.root_markers) do
      if vim.loop.fs_stat(current .. "/" .. marker) then
        return current
      end
    end
    local parent = vim.fn.fnamemodify(current, ":h")
    if parent == current or current == home then
      break
    end
    current = parent
  end
  return dir
end

--- `runfix/input`: the running code called input() (or getpass()): ask with vim.ui.input
--- (inputsecret for a password). Waits for UIs that answer later; no answer cancels the run.
function M.ask_input(_, params)
  params = params or {}
  local done, value = false, nil
  local function answer(text)
    done, value = true, text
  end
  if params.password then
    local ok, text = pcall(vim.fn.inputsecret, params.prompt or "")
    answer(ok and text or nil)
  else
    vim.ui.input({ prompt = params.prompt or "" }, answer)
  end
  if not done then
    vim.wait(24 * 3600 * 1000, function()
      return done
    end, 50)
  end
  if value == nil then
    return vim.NIL
  end
  return { value = value }
end

--- `window/showMessageRequest` through vim.ui.select, so that a picker plugin (telescope,
--- dressing, snacks) shows runfix's questions (trust a folder, run flagged code). Waits for
--- pickers that answer later; no choice is no answer (runfix then runs nothing).
function M.show_message_request(_, params)
  params = params or {}
  local actions = params.actions or {}
  if #actions == 0 then
    return vim.NIL
  end
  local done, chosen = false, nil
  vim.ui.select(actions, {
    prompt = params.message or "runfix",
    format_item = function(action)
      return action.title
    end,
  }, function(action)
    done, chosen = true, action
  end)
  if not done then
    vim.wait(24 * 3600 * 1000, function()
      return done
    end, 50)
  end
  return chosen or vim.NIL
end

--- `workspace/inlayHint/refresh` (a run's results changed): each shown buffer's hints start
--- afresh. Neovim's own handler can leave a run's values off the screen until the next edit:
--- a redraw between the refresh and the hints' answer marks the lines drawn, and the answer
--- (same buffer version) is not drawn (neovim/neovim#32248). Enabling again starts the
--- buffer's hint state anew, drawn when the answer comes.
function M.inlay_hints_refreshed(err, _, ctx)
  if err or not vim.lsp.inlay_hint then
    return vim.NIL
  end
  for _, bufnr in ipairs(vim.lsp.get_buffers_by_client_id(ctx.client_id)) do
    if vim.fn.bufwinid(bufnr) ~= -1 and vim.lsp.inlay_hint.is_enabled({ bufnr = bufnr }) then
      vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
    end
  end
  return vim.NIL
end

--- Progress in the echo area, where Neovim has no progress UI of its own (0.7–0.9 keep it in
--- `client.messages`; 0.10+ in `vim.lsp.status()`): "runfix: attempt 2/3: the model is
--- reading the prompt (12 s)", cleared when the work ends. Neovim's own handler runs first,
--- so a progress plugin (fidget) still gets it.
M.working = {} -- progress token -> when it began (ms)

function M.progress(result)
  local value = type(result) == "table" and result.value or nil
  if type(value) ~= "table" then
    return
  end
  local token = tostring(result.token)
  if value.kind == "begin" then
    M.working[token] = vim.loop.now()
  elseif value.kind == "end" then
    M.working[token] = nil
    vim.schedule(function()
      vim.api.nvim_echo({ { "" } }, false, {})
    end)
    return
  end
  local began = M.working[token]
  if value.message == nil or began == nil then
    return
  end
  local seconds = math.floor((vim.loop.now() - began) / 1000)
  local line = "runfix: " .. value.message:gsub("\n.*", "") .. " (" .. seconds .. " s)"
  vim.schedule(function()
    vim.api.nvim_echo({ { line:sub(1, math.max(vim.o.columns - 12, 20)) } }, false, {})
  end)
end

local neovims_progress = vim.lsp.handlers["$/progress"]

--- The server's messages (`window/showMessage`), with one "runfix: "; remembered a moment,
--- so that a command whose answer says the same is not said twice.
M.shown = {} -- message -> when it was shown (ms)
local LEVELS = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }

function M.show_message(_, result)
  if type(result) == "table" and type(result.message) == "string" then
    local text = result.message:gsub("^runfix: ", "")
    M.shown[text] = vim.loop.now()
    notify(text, LEVELS[result.type] or vim.log.levels.INFO)
  end
  return vim.NIL
end

local function handlers()
  return {
    ["window/showMessage"] = M.show_message,
    ["$/progress"] = function(err, result, ctx, config)
      if neovims_progress then
        neovims_progress(err, result, ctx, config)
      end
      M.progress(result)
    end,
    ["workspace/inlayHint/refresh"] = M.inlay_hints_refreshed,
    ["window/showMessageRequest"] = M.show_message_request,
    ["runfix/status"] = function(_, result)
      if type(result) == "table" and result.folder then
        M.states[result.folder] = { state = result.state, executor = result.executor }
      end
    end,
    ["runfix/input"] = M.ask_input,
  }
end

--- nvim-dap, where it is installed (nil: debugging is not offered).
local function nvim_dap()
  local ok, dap = pcall(require, "dap")
  return ok and dap or nil
end

--- Neovim's capabilities, plus: this client answers `runfix/input`; with nvim-dap, it starts
--- debug sessions itself (the server's "Debug cell" lenses and "Debug this error" actions).
local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  local ours = { runfixInput = true, runfixDebug = nvim_dap() ~= nil }
  caps.experimental = vim.tbl_extend("force", caps.experimental or {}, ours)
  return caps
end

local function on_attach(client, bufnr)
  -- Results come as inlay hints where Neovim has them (0.10+), else as Information diagnostics.
  if vim.lsp.inlay_hint and client.server_capabilities.inlayHintProvider then
    pcall(vim.lsp.inlay_hint.enable, true, { bufnr = bufnr })
  end
end

local function client_config(root)
  return {
    name = NAME,
    cmd = M.config.cmd,
    root_dir = root,
    workspace_folders = root and { { uri = vim.uri_from_fname(root), name = root } } or nil,
    init_options = M.config.settings,
    settings = { runfix = M.config.settings },
    capabilities = capabilities(),
    handlers = handlers(),
    on_attach = on_attach,
  }
end

--- The runfix client attached to a buffer, if any (every Neovim version).
function M.client(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ bufnr = bufnr, name = NAME })[1]
  end
  for _, client in pairs(vim.lsp.buf_get_clients(bufnr)) do
    if client.name == NAME then
      return client
    end
  end
  return nil
end

local started = {} -- 0.7: root -> client id

local function attach_07(bufnr)
  local root = M.root_dir(vim.api.nvim_buf_get_name(bufnr))
  local id = started[root]
  if id == nil or vim.lsp.get_client_by_id(id) == nil then
    id = vim.lsp.start_client(client_config(root))
    if id == nil then
      notify("could not start `" .. table.concat(M.config.cmd, " ") .. "`", vim.log.levels.ERROR)
      return
    end
    started[root] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
end

local function start(bufnr)
  if vim.fn.executable(M.config.cmd[1]) ~= 1 then
    notify(
      "`" .. M.config.cmd[1] .. "` not found: install runfix (pip install runfix-lsp) "
        .. "or set `cmd` in require('runfix').setup()",
      vim.log.levels.ERROR
    )
    return
  end
  if vim.lsp.start then
    local root = M.root_dir(vim.api.nvim_buf_get_name(bufnr))
    vim.lsp.start(client_config(root), { bufnr = bufnr })
  else
    attach_07(bufnr)
  end
end

-- Commands ------------------------------------------------------------------------------

local function request(command, argument, on_result, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  if client == nil then
    local filetypes = table.concat(M.config.filetypes, ", ")
    notify("not attached to this buffer (runfix runs " .. filetypes .. " files)", vim.log.levels.WARN)
    return
  end
  local params = { command = command, arguments = argument and { argument } or {} }
  local function answered(err, result)
    if err then
      notify(command .. ": " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    elseif on_result then
      on_result(result)
    end
  end
  if vim.fn.has("nvim-0.11") == 1 then
    client:request("workspace/executeCommand", params, answered, bufnr) -- (client.request: deprecated)
  else
    client.request("workspace/executeCommand", params, answered, bufnr)
  end
end

local function uri()
  return vim.uri_from_bufnr(vim.api.nvim_get_current_buf())
end

local function cursor_position()
  local row = vim.api.nvim_win_get_cursor(0)[1]
  return { line = row - 1, character = 0 }
end

local function report(result)
  if type(result) ~= "table" then
    return
  end
  local status = result.status
  if status == "ok" or status == "fixed" or (status == "error" and not result.message) then
    return -- an error the code raised is already a diagnostic on its line
  end
  local level = status == "error" and vim.log.levels.WARN or vim.log.levels.INFO
  -- (the server's messages may begin with its own "runfix: ", which notify adds once)
  local said = result.message and (result.message:gsub("^runfix: ", "")) or nil
  if said and M.shown[said] and vim.loop.now() - M.shown[said] < 10000 then
    return -- the server has just shown it (`window/showMessage`)
  end
  local text = status .. (said and (": " .. said) or "")
  notify(text, level)
end

--- The lines of a command's range (`:'<,'>Cmd`) as an LSP range, or nil without one.
local function line_range(opts)
  if not (opts and opts.range and opts.range > 0) then
    return nil
  end
  return {
    start = { line = opts.line1 - 1, character = 0 },
    ["end"] = { line = opts.line2, character = 0 },
  }
end

--- `:RunfixRun` runs the file cell by cell; with a range (`:'<,'>RunfixRun`) those lines.
function M.run(opts)
  request("runfix.run", { uri = uri(), range = line_range(opts) }, report)
end

function M.run_cell()
  request("runfix.run", { uri = uri(), position = cursor_position() }, report)
end

--- `:RunfixRunAbove` (the cells before the cursor's), `:RunfixRunBelow` (its cell and
--- those after), `:RunfixRestartRunTo` (restart, then every cell up to and including it).
function M.run_above()
  request("runfix.runAbove", { uri = uri(), position = cursor_position() }, report)
end

function M.run_below()
  request("runfix.runBelow", { uri = uri(), position = cursor_position() }, report)
end

--- `:RunfixRunDependents`: the cells below the cursor's that read what it defines.
function M.run_dependents()
  request("runfix.runDependents", { uri = uri(), position = cursor_position() }, report)
end

--- `:RunfixTest`: the project's tests — in a test file the test under the cursor (else
--- the file's), in another file all of them; failures land on their lines.
function M.run_tests()
  request("runfix.runTests", { uri = uri(), position = cursor_position() }, report)
end

--- `:RunfixTestFix`: those tests, then each failure's module function fixed by the model
--- (applied only once the failing tests pass and the passing ones still do).
function M.fix_tests()
  request("runfix.fixTests", { uri = uri(), position = cursor_position() }, finished("fix"))
end

function M.restart_run_to()
  request("runfix.restartAndRunTo", { uri = uri(), position = cursor_position() }, report)
end

--- A model command's answer, whatever it was: a fix or a generation is said when it ends
--- ("nothing to fix" too), as a failure is.
local function finished(what)
  return function(result)
    if type(result) == "table" and result.status == "ok" then
      notify(what == "fix" and "ok: it ran clean, nothing to fix" or "ok: generated")
    elseif type(result) == "table" and result.status == "fixed" then
      local attempts = tonumber(result.attempts) or 0
      local said = attempts == 0 and "fixed (no model needed)" or ("fixed on attempt " .. attempts)
      if type(result.says) == "string" and result.says ~= "" then
        said = said .. "; it now prints `" .. result.says .. "`"
      end
      notify(said)
    else
      report(result)
    end
  end
end

--- `:RunfixRunAndFix`: the cell under the cursor, or the range.
function M.run_and_fix(opts)
  local range = line_range(opts)
  local argument = { uri = uri(), range = range, position = range == nil and cursor_position() or nil }
  request("runfix.runAndFix", argument, finished("fix"))
end

function M.generate(opts)
  local run = opts ~= nil and opts.bang == true
  request("runfix.generate", { uri = uri(), position = cursor_position(), run = run }, finished("generate"))
end

function M.interrupt()
  request("runfix.interrupt", { uri = uri() })
end

function M.restart()
  request("runfix.restart", { uri = uri() })
end

function M.variables()
  request("runfix.variables", { uri = uri() }, function(result)
    local lines = {}
    for _, v in ipairs(result or {}) do
      local shape = v.shape and ("shape " .. table.concat(v.shape, "x")) or (v.length and ("len " .. v.length)) or ""
      table.insert(lines, string.format("%-20s %-14s %-14s %s", v.name, v.type, shape, v.summary or ""))
    end
    if #lines == 0 then
      lines = { "(no variables)" }
    end
    vim.api.nvim_echo({ { table.concat(lines, "\n") } }, false, {})
  end)
end

--- What a float shows of `runfix.outputs`' answer: text as text, DataFrames as markdown
--- tables, plots and HTML by what they are and where their file is.
function M.output_lines(answer)
  local lines = {}
  local function add(text)
    for _, line in ipairs(vim.split((text or ""):gsub("\n$", ""), "\n", { plain = true })) do
      table.insert(lines, line)
    end
  end
  if type(answer) ~= "table" or answer.first == nil or answer.first == vim.NIL then
    return { "Nothing has run here yet." }
  end
  local where = answer.first == answer.last and ("line " .. (answer.first + 1))
    or ("lines " .. (answer.first + 1) .. "–" .. (answer.last + 1))
  add("**" .. vim.fn.fnamemodify(vim.uri_to_fname(answer.uri), ":t") .. ", " .. where .. "**")
  for _, output in ipairs(answer.outputs or {}) do
    add("")
    if output.table then
      add(output.table)
    elseif output.markdown then
      add(output.markdown)
    elseif output.kind == "text" then
      add("```text\n" .. output.text:gsub("\n$", "") .. "\n```")
    else
      local file = output.image or output.file
      add(output.text:gsub("\n$", "") .. (file and ("  `" .. vim.fn.fnamemodify(file, ":~:.") .. "`") or ""))
    end
  end
  if #(answer.outputs or {}) == 0 then
    add("")
    add("No output here.")
  end
  add("")
  add("*o: plots, tables and HTML in the browser*")
  return lines
end

--- Opens a URL: `vim.ui.open` (0.10+), else the system's opener.
local function open_url(url)
  if vim.ui.open then
    return vim.ui.open(url)
  end
  local opener = vim.fn.has("mac") == 1 and "open" or "xdg-open"
  if vim.fn.executable(opener) == 1 then
    vim.fn.jobstart({ opener, url }, { detach = true })
  else
    notify("the output page: " .. url)
  end
end

--- The rich view (plots, tables, HTML) of the line in the browser: the server's loopback
--- page. A client that opens pages itself (0.10+) is asked to; else it is opened here.
function M.open_page(target, bufnr)
  target = target or { uri = uri(), position = cursor_position() }
  request("runfix.showOutput", target, function(result)
    if type(result) == "table" and result.url and not result.shown then
      open_url(result.url)
    end
  end, bufnr)
end

--- Images in the float, when image.nvim is installed (optional; needs a terminal that
--- shows images). Any failure leaves the float as text.
local function float_images(answer, buf, win)
  local ok, image = pcall(require, "image")
  if not ok or type(image) ~= "table" or type(image.from_file) ~= "function" then
    return
  end
  local row = vim.api.nvim_buf_line_count(buf)
  for _, output in ipairs(answer.outputs or {}) do
    if output.image and not output.image:match("%.svg$") then
      pcall(function()
        local shown = image.from_file(output.image, { window = win, buffer = buf, x = 0, y = row })
        if shown then
          shown:render()
        end
      end)
    end
  end
end

--- `:RunfixOutput`: the outputs of the statement (or cell) under the cursor in a float; `o`
--- in it (or `:RunfixOutput!`) opens the rich view in the browser.
function M.output(opts)
  local target = { uri = uri(), position = cursor_position() }
  local source = vim.api.nvim_get_current_buf()
  if opts and opts.bang then
    return M.open_page(target, source)
  end
  request("runfix.outputs", target, function(answer)
    local lines = M.output_lines(answer)
    local buf, win = vim.lsp.util.open_floating_preview(lines, "markdown", {
      border = "rounded",
      focus_id = "runfix-output",
      max_width = math.max(40, math.floor(vim.o.columns * 0.8)),
      max_height = math.max(10, math.floor(vim.o.lines * 0.7)),
    })
    vim.api.nvim_buf_set_keymap(buf, "n", "o", "", {
      noremap = true,
      nowait = true,
      desc = "runfix: open the rich view in the browser",
      callback = function()
        M.open_page(target, source)
      end,
    })
    M.last_output = { buf = buf, win = win, lines = lines }
    float_images(answer, buf, win)
  end)
end

--- The quickfix items of `runfix.history`'s answer: one per run, newest first.
function M.history_items(runs)
  local items = {}
  for _, run in ipairs(runs or {}) do
    local when = os.date("%Y-%m-%d %H:%M:%S", math.floor(run.started or 0))
    local said = run.said and run.said ~= vim.NIL and ("  " .. run.said) or ""
    table.insert(items, {
      filename = run.path,
      lnum = run.first + 1,
      end_lnum = run.last + 1,
      col = 1,
      type = run.status == "ok" and "I" or "E",
      text = string.format("#%d %s %s %s %s%s", run.id, when, run.origin, run.status, run.figures or "", said),
    })
  end
  return items
end

--- `:RunfixHistory`: this file's runs, newest first, in the quickfix list (`!`: every
--- file's); each with its time, origin, status, figures and what it showed.
function M.history(opts)
  local all = opts and opts.bang
  request("runfix.history", all and { limit = 200 } or { uri = uri(), limit = 200 }, function(runs)
    vim.fn.setqflist({}, " ", { title = "runfix history", items = M.history_items(runs) })
    if #(runs or {}) == 0 then
      notify("no runs recorded yet")
    else
      vim.cmd("copen")
    end
  end)
end

--- `:RunfixExport`: the buffer (as it stands) and its last outputs as `<name>.ipynb`.
function M.export()
  request("runfix.export", { uri = uri() }, function(done)
    if type(done) == "table" and done.path then
      notify(string.format("wrote %s (%d cells, %d with outputs)", done.path, done.cells, done.withOutputs))
    end
  end)
end

--- `:RunfixTrust [trust|sandbox|own]`: let this buffer's folder run its code (kept in your
--- state folder). `:RunfixUntrust`: forget that; the folder's kernel stops at once.
function M.trust(opts)
  local choice = opts and opts.args ~= "" and opts.args or "trust"
  request("runfix.trust", { uri = uri(), choice = choice }, function(answers)
    for _, answer in ipairs(answers or {}) do
      notify(vim.uri_to_fname(answer.folder) .. ": " .. tostring(answer.choice))
    end
  end)
end

function M.untrust()
  request("runfix.untrust", { uri = uri() }, function(answers)
    for _, answer in ipairs(answers or {}) do
      notify(vim.uri_to_fname(answer.folder) .. ": no longer trusted")
    end
  end)
end

--- The state of the current buffer's kernel, for a statusline: "idle (docker)".
function M.status(bufnr)
  local client = M.client(bufnr)
  if client == nil then
    return ""
  end
  local folder = client.config.root_dir and vim.uri_from_fname(client.config.root_dir)
  local state = folder and M.states[folder]
  if state == nil then
    return "runfix"
  end
  return string.format("runfix %s (%s)", state.state, state.executor)
end

-- Debugging (issue 60): `runfix dap` is nvim-dap's adapter; it debugs in the kernel this
-- Neovim's runfix holds for the folder. A launch names the file and a line of the cell.

--- The runfix command line itself: the server's `cmd` up to its `serve` (`{ "runfix" }`).
local function runfix_cli()
  local cmd = {}
  for _, arg in ipairs(M.config.cmd) do
    if arg == "serve" then
      break
    end
    cmd[#cmd + 1] = arg
  end
  return cmd
end

--- nvim-dap's adapter for type "runfix": `runfix dap` on stdio.
function M.dap_adapter()
  local cli = runfix_cli()
  local args = {}
  for i = 2, #cli do
    args[#args + 1] = cli[i]
  end
  args[#args + 1] = "dap"
  return { type = "executable", command = cli[1], args = args }
end

--- The launch of the cell holding `line` (from 1) of `file`; `error`: "Debug this error" (it
--- stops where the cell's last error is raised); `post_mortem`: the kernel's last error,
--- its frames and values, nothing run again.
function M.debug_config(file, line, error, post_mortem)
  return {
    type = "runfix",
    request = "launch",
    name = post_mortem and "runfix: the last error" or error and "runfix: debug this error"
      or "runfix: debug cell",
    program = file,
    line = line,
    stopOnError = error or nil,
    postMortem = post_mortem or nil,
  }
end

local function debug_at(file, line, error, post_mortem)
  local dap = nvim_dap()
  if dap == nil then
    notify("debugging needs nvim-dap (github.com/mfussenegger/nvim-dap): runfix dap is its adapter",
      vim.log.levels.WARN)
    return
  end
  dap.adapters.runfix = dap.adapters.runfix or M.dap_adapter()
  dap.run(M.debug_config(file, line, error, post_mortem))
end

--- :RunfixDebugCell — the cell under the cursor, under nvim-dap with its breakpoints.
function M.debug_cell()
  debug_at(vim.api.nvim_buf_get_name(0), vim.api.nvim_win_get_cursor(0)[1], false)
end

--- :RunfixDebugError — the cell under the cursor again, stopping where its error is raised;
--- with !, the kernel's last error as it is (post-mortem: nothing runs again).
function M.debug_error(opts)
  local bang = opts ~= nil and opts.bang
  debug_at(vim.api.nvim_buf_get_name(0), vim.api.nvim_win_get_cursor(0)[1], not bang, bang)
end

--- The server's lenses and code actions name the editor's commands: `{uri, line}` (0-based).
local function debug_commands()
  for name, error in pairs({ ["runfix.debugCell"] = false, ["runfix.debugError"] = true }) do
    vim.lsp.commands[name] = function(command)
      local where = (command.arguments or {})[1] or {}
      debug_at(vim.uri_to_fname(where.uri), (where.line or 0) + 1, error)
    end
  end
  local dap = nvim_dap()
  if dap ~= nil then
    dap.adapters.runfix = dap.adapters.runfix or M.dap_adapter()
    dap.configurations.python = dap.configurations.python or {}
    table.insert(dap.configurations.python, M.debug_config("${file}", function()
      return vim.api.nvim_win_get_cursor(0)[1]
    end, false))
  end
end

local function user_commands()
  local add = vim.api.nvim_create_user_command
  add("RunfixRun", M.run, { range = true, desc = "runfix: run the file (or the range)" })
  add("RunfixRunCell", M.run_cell, { desc = "runfix: run the cell under the cursor" })
  add("RunfixRunAbove", M.run_above, { desc = "runfix: run the cells above" })
  add("RunfixRunBelow", M.run_below, { desc = "runfix: run this cell and those below" })
  add("RunfixRunDependents", M.run_dependents, { desc = "runfix: run the cells that read this one's names" })
  add("RunfixRestartRunTo", M.restart_run_to, { desc = "runfix: restart, run up to this cell" })
  add("RunfixTest", M.run_tests, { desc = "runfix: run the test here (or the file's, or all)" })
  add("RunfixTestFix", M.fix_tests, { desc = "runfix: run the tests, fix what fails in the module" })
  add("RunfixRunAndFix", M.run_and_fix, { range = true, desc = "runfix: run and fix the cell" })
  add("RunfixGenerate", M.generate, { bang = true, desc = "runfix: generate from the prompt (! runs it)" })
  add("RunfixInterrupt", M.interrupt, { desc = "runfix: interrupt the kernel" })
  add("RunfixRestart", M.restart, { desc = "runfix: restart the kernel" })
  add("RunfixVariables", M.variables, { desc = "runfix: the kernel's variables" })
  add("RunfixHistory", M.history, { bang = true, desc = "runfix: this file's runs (! every file's)" })
  add("RunfixExport", M.export, { desc = "runfix: export as a notebook with its outputs" })
  add("RunfixOutput", M.output, { bang = true, desc = "runfix: the outputs here (! in the browser)" })
  add("RunfixTrust", M.trust, {
    nargs = "?",
    complete = function()
      return { "trust", "sandbox", "own" }
    end,
    desc = "runfix: let this folder run its code (trust | sandbox | own Python)",
  })
  add("RunfixUntrust", M.untrust, { desc = "runfix: stop trusting this folder (stops its kernel)" })
  add("RunfixDebugCell", M.debug_cell, { desc = "runfix: debug the cell (nvim-dap)" })
  add("RunfixDebugError", M.debug_error, {
    bang = true,
    desc = "runfix: debug the cell's error (! the last error as it is) (nvim-dap)",
  })
end

local function with_args(cmd, ...)
  local out = vim.deepcopy(cmd)
  for _, arg in ipairs({ ... }) do
    out[#out + 1] = arg
  end
  return out
end

--- `*.ipynb` opens as percent text (`runfix notebook read`): its cells under `# %%` lines,
--- markdown as `# %% [markdown]` comments, so every runfix feature works on it as on a `.py`.
function M.read_notebook(bufnr, file)
  local lines = vim.fn.systemlist(with_args(runfix_cli(), "notebook", "read", file))
  if vim.v.shell_error ~= 0 then
    notify(table.concat(lines, "\n"), vim.log.levels.ERROR)
    return
  end
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
  vim.bo[bufnr].swapfile = false
  vim.bo[bufnr].modified = false
  vim.bo[bufnr].filetype = "python"
end

--- `:w` of an `.ipynb` buffer: `runfix notebook write` makes the notebook of the text —
--- what did not change kept (cell ids, metadata, attachments, outputs), the latest runs'
--- outputs stored for the cells that ran — validated, and renamed into place whole.
function M.write_notebook(bufnr, file)
  local text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") .. "\n"
  local said = vim.fn.system(with_args(runfix_cli(), "notebook", "write", file), text)
  if vim.v.shell_error ~= 0 then
    notify(vim.trim(said), vim.log.levels.ERROR)
    return
  end
  vim.bo[bufnr].modified = false
  notify((vim.trim(said):gsub("^runfix: ", "")))
end

local function notebooks(group)
  vim.api.nvim_create_autocmd("BufReadCmd", {
    group = group,
    pattern = "*.ipynb",
    callback = function(args)
      M.read_notebook(args.buf, args.match)
    end,
  })
  vim.api.nvim_create_autocmd("BufWriteCmd", {
    group = group,
    pattern = "*.ipynb",
    callback = function(args)
      M.write_notebook(args.buf, args.match)
    end,
  })
end

--- The configuration for `vim.lsp.config` (Neovim 0.11+): what `lsp/runfix.lua` returns,
--- and what setup() registers. The folder comes from `root_markers`.
function M.lsp_config()
  local config = client_config(nil)
  config.root_dir = nil
  config.workspace_folders = nil
  config.root_markers = M.config.root_markers
  config.filetypes = M.config.filetypes
  return config
end

function M.setup(opts)
  opts = opts or {}
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  -- A list given replaces the default (tbl_deep_extend would merge them by index).
  for _, key in ipairs({ "cmd", "filetypes", "root_markers" }) do
    if opts[key] ~= nil then
      M.config[key] = opts[key]
    end
  end
  user_commands()
  debug_commands()
  local group = vim.api.nvim_create_augroup("runfix", { clear = true })
  notebooks(group)
  if vim.lsp.config and vim.lsp.enable then
    vim.lsp.config(NAME, M.lsp_config())
    vim.lsp.enable(NAME)
    return
  end
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      start(args.buf)
    end,
  })
  -- Buffers already open when setup() runs.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(M.config.filetypes, vim.bo[bufnr].filetype) then
      start(bufnr)
    end
  end
end

return M
