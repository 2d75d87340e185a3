-- Headless Neovim, two files of one folder (issue 70, 8): the first run of the second says
-- it shares the first's kernel (one kernel per folder), once. Writes $RUNFIX_NVIM_REPORT.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  local runfix = harness.setup(report, {})
  local function ran(name)
    vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE"):match("(.*/)") .. name))
    vim.bo.filetype = "python"
    vim.wait(20000, function()
      return runfix.client(0) ~= nil
    end, 50)
    local status = nil
    runfix.client(0).request("workspace/executeCommand", {
      command = "runfix.run",
      arguments = { { uri = vim.uri_from_bufnr(0) } },
    }, function(_, result)
      status = result and result.status or "none"
    end, 0)
    vim.wait(60000, function()
      return status ~= nil
    end, 50)
    vim.wait(500) -- (a message the run sent comes before its answer; a moment for the UI)
    return status
  end
  report.first = ran("sales.py")
  report.second = ran("shapes.py")
  report.again = ran("shapes.py")
end)
