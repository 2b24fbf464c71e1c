# Command-line checks: the real binary on real and broken inputs. Each bad input must give one
# "sightline: ..." line and a non-zero exit (WILL_FAIL turns a non-zero exit into a pass, and the
# regular expression checks the message).
set(_fixture "${CMAKE_CURRENT_SOURCE_DIR}/fixtures/kineto/qwen3next_fallback_small.json.gz")
set(_inputs "${CMAKE_CURRENT_SOURCE_DIR}/inputs")

add_test(NAME cli.report_text COMMAND sightline report ${_fixture})
set_tests_properties(cli.report_text PROPERTIES PASS_REGULAR_EXPRESSION "Ops \\(top 25 of [0-9]+, by self CPU\\)")
add_test(NAME cli.report_md COMMAND sightline report ${_fixture} --format md --limit 3)
set_tests_properties(cli.report_md PROPERTIES PASS_REGULAR_EXPRESSION "\\| Name \\| Kind \\| Calls \\|")
add_test(NAME cli.report_json COMMAND sightline report ${_fixture} --format json --limit 2 --sort calls)
set_tests_properties(cli.report_json PROPERTIES PASS_REGULAR_EXPRESSION "\"sightline_report\": 1")

foreach(case
    "missing|/nonexistent/trace.json|no such file"
    "not_json|${_inputs}/not_json.json|not a trace Sightline can read"
    "not_trace|${_inputs}/not_a_trace.json|no \"traceEvents\""
    "empty_trace|${_inputs}/empty_trace.json|no events"
    "truncated_gz|${_inputs}/truncated.json.gz|truncated gzip")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 input)
  list(GET parts 2 message)
  add_test(NAME cli.bad_${name} COMMAND sightline report ${input})
  set_tests_properties(cli.bad_${name} PROPERTIES WILL_FAIL TRUE)
  add_test(NAME cli.bad_${name}_message COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:sightline>
           -DINPUT=${input} "-DEXPECT=${message}" -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_one_line_error.cmake)
endforeach()

# A trace of GPU activity alone (here one kernel, no launch call) is analysed on the GPU side, with
# one line saying what is missing.
add_test(NAME cli.report_gpu_only COMMAND sightline report ${_inputs}/gpu_only.json)
set_tests_properties(cli.report_gpu_only PROPERTIES PASS_REGULAR_EXPRESSION
                     "GPU activity only: the trace has no CPU ops[^\n]*no CUDA API calls either")

# --combine replays several findings' fixes together; a rule id it does not know is named.
add_test(NAME cli.report_combine COMMAND sightline report ${_fixture} --combine gdn-torch-fallback,elementwise-storm,dataloader-stall)
set_tests_properties(cli.report_combine PROPERTIES PASS_REGULAR_EXPRESSION
                     "Together: the fixes of gdn-torch-fallback and elementwise-storm replayed at once save[^;]*ms a step .[0-9.]+%.; left out[^:]*: dataloader-stall")
add_test(NAME cli.report_combine_unknown COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:sightline> -DSUBCMD=report
         -DINPUT=${_fixture} "-DEXTRA=--combine=gdn-torch-fallback,no-such-rule" "-DEXPECT=--combine: no rule 'no-such-rule'"
         -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_one_line_error.cmake)
add_test(NAME cli.bad_flag COMMAND sightline report ${_fixture} --format xml)
set_tests_properties(cli.bad_flag PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli.no_subcommand COMMAND sightline)
set_tests_properties(cli.no_subcommand PROPERTIES WILL_FAIL TRUE)
# An unknown subcommand is named in one line, with the commands there are.
add_test(NAME cli.unknown_subcommand COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:sightline> -DSUBCMD=frobnicate
         "-DEXPECT=unknown command 'frobnicate' (commands: report, import, export, diff" -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_one_line_error.cmake)

# The project's own checker (../shared/tools/compare_key_averages.py, beside the checkout on
# development machines and in CI): the JSON op table against PyTorch's key_averages() table.
# Skipped (exit 77) when the shared folder is not there.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  foreach(fixture qwen3next_fallback_small dense_healthy)
    add_test(NAME cli.key_averages_${fixture}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/compare_key_averages.sh $<TARGET_FILE:sightline> ${Python3_EXECUTABLE}
                     ${PROJECT_SOURCE_DIR}/../shared/tools/compare_key_averages.py
                     ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/kineto/${fixture}.json.gz
                     ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/kineto/${fixture}.key_averages.txt
                     ${CMAKE_CURRENT_BINARY_DIR}/${fixture}.report.json)
    set_tests_properties(cli.key_averages_${fixture} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
endif()

# sightline export: the bundled trace (plain and gzip), its database and a capture exported, each
# checked by tests/check_chrome_trace.py and read back with the same report as its source.
if(Python3_FOUND)
  set(_export_job "")
  if(TARGET sightline_collector AND TARGET sightline_test_torch_ops)
    set(_export_job $<TARGET_FILE:sightline_test_torch_ops>)
  endif()
  add_test(NAME cli.export COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/export_cli_test.sh $<TARGET_FILE:sightline>
           ${Python3_EXECUTABLE} ${_fixture} ${CMAKE_CURRENT_BINARY_DIR}/export_test ${_export_job})
  set_tests_properties(cli.export PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION "export checks passed")
endif()

# The advisor on the command line.
set(_dense "${CMAKE_CURRENT_SOURCE_DIR}/fixtures/kineto/dense_healthy.json.gz")
add_test(NAME cli.report_findings COMMAND sightline report ${_fixture} --limit 1)
set_tests_properties(cli.report_findings PROPERTIES PASS_REGULAR_EXPRESSION
  "Gated DeltaNet runs on the transformers torch fallback.*Depthwise causal conv1d")
add_test(NAME cli.report_sarif COMMAND sightline report ${_fixture} --format sarif)
set_tests_properties(cli.report_sarif PROPERTIES PASS_REGULAR_EXPRESSION "\"ruleId\": \"gdn-torch-fallback\".*\"version\": \"2.1.0\"")
# --fail-on: the fixture has findings at error severity, so the report exits with status 4.
add_test(NAME cli.fail_on_error COMMAND sightline report ${_fixture} --fail-on error)
set_tests_properties(cli.fail_on_error PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli.fail_on_error_code COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:sightline>
         "-DARGS=report;${_fixture};--fail-on;warning;-o;/dev/null" -DEXPECT_RC=4
         -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit_code.cmake)
add_test(NAME cli.diff_self COMMAND sightline diff ${_fixture} ${_fixture})
set_tests_properties(cli.diff_self PROPERTIES PASS_REGULAR_EXPRESSION "Verdict: no regression \\(step time \\+0.0%")
add_test(NAME cli.diff_regression_code COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:sightline>
         "-DARGS=diff;${_dense};${_fixture};--max-regression;5%;-o;/dev/null" -DEXPECT_RC=5
         -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit_code.cmake)
add_test(NAME cli.diff_bad_threshold COMMAND sightline diff ${_fixture} ${_fixture} --max-regression lots)
set_tests_properties(cli.diff_bad_threshold PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli.rules_list COMMAND sightline rules list)
set_tests_properties(cli.rules_list PROPERTIES PASS_REGULAR_EXPRESSION "packed-without-boundaries")
add_test(NAME cli.rules_explain COMMAND sightline rules explain gdn-torch-fallback)
set_tests_properties(cli.rules_explain PROPERTIES PASS_REGULAR_EXPRESSION "fires when:.*saving: the what-if replay of the step with the fix applied:.*merge_kernels")
add_test(NAME cli.rules_explain_unknown COMMAND sightline rules explain no-such-rule)
set_tests_properties(cli.rules_explain_unknown PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli.bad_rule_file_others_run COMMAND sightline report ${_fixture} --limit 1 --rules ${_inputs}/bad_rule.toml)
set_tests_properties(cli.bad_rule_file_others_run PROPERTIES PASS_REGULAR_EXPRESSION
  "rule skipped: .*bad_rule.toml:3: in 'when': unknown metric 'kernels.cout'.*gdn-torch-fallback")

# The batching simulator on a file of lengths and a JSONL dataset (the same six sequences, docs/padding.md):
# padded in order [5,3] [8] [2] [7] [1], packed rows [5,3] [8,2] [7,1] at 10 tokens a batch.
foreach(input lengths.txt dataset.jsonl)
  add_test(NAME cli.padding_${input} COMMAND sightline padding ${_inputs}/${input} --budget 10)
  set_tests_properties(cli.padding_${input} PROPERTIES PASS_REGULAR_EXPRESSION
    "6 sequences.*padded, in order +5 +6 +26 +28 +92.86%.*packed rows +3 +6 +26 +26 +100.00%")
endforeach()
foreach(case
    "no_batches|${_fixture}||no recorded batches"
    "no_budget|${_inputs}/lengths.txt||give --budget TOKENS"
    "bad_length|${_inputs}/bad_lengths.txt|--budget=10|bad_lengths.txt:2: 'x3' is not a sequence length"
    "bad_jsonl|${_inputs}/bad_dataset.jsonl|--budget=10|bad_dataset.jsonl:2: no \"input_ids\" list")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 input)
  list(GET parts 2 extra)
  list(GET parts 3 message)
  add_test(NAME cli.padding_${name} COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:sightline> -DSUBCMD=padding
           -DINPUT=${input} "-DEXTRA=${extra}" "-DEXPECT=${message}" -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_one_line_error.cmake)
endforeach()

# sightline run: the collector preloaded into a real program. Without a GPU (CI) CUPTI is
# unavailable and the collector says so in one line and records the CPU ops; the libtorch
# program's ops arrive through the bridge with their exact counts.
if(TARGET sightline_collector)
  add_test(NAME cli.run_no_cuda_job COMMAND sightline run -o ${CMAKE_CURRENT_BINARY_DIR}/run_echo -- /bin/echo profiled)
  set_tests_properties(cli.run_no_cuda_job PROPERTIES PASS_REGULAR_EXPRESSION "the job exited with status 0; 1 capture")
  # --dormant: the job gets SIGHTLINE_DORMANT=1 and the Python adapter's directory on PYTHONPATH.
  add_test(NAME cli.run_dormant COMMAND sightline run --dormant -o ${CMAKE_CURRENT_BINARY_DIR}/run_dormant --
           /bin/sh -c "echo dormant=$SIGHTLINE_DORMANT path=$PYTHONPATH")
  set_tests_properties(cli.run_dormant PROPERTIES PASS_REGULAR_EXPRESSION
    "started dormant; record windows with: sightline attach [0-9]+.*dormant=1 path=[^ ]*/collector/python")
  add_test(NAME cli.run_exit_code COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:sightline>
           "-DARGS=run;-o;${CMAKE_CURRENT_BINARY_DIR}/run_false;--;/bin/sh;-c;exit 7" -DEXPECT_RC=7
           -P ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit_code.cmake)
  if(TARGET sightline_test_torch_ops)
    add_test(NAME cli.run_torch_ops COMMAND sightline run -o ${CMAKE_CURRENT_BINARY_DIR}/run_torch -- $<TARGET_FILE:sightline_test_torch_ops>)
    # The ops table is ordered by self CPU time, so either op may come first (a hiccup once made
    # the three adds 14 ms).
    set_tests_properties(cli.run_torch_ops PROPERTIES PASS_REGULAR_EXPRESSION
      "3 step\\(s\\) found by user range.*(aten::mm +op +3 .*aten::add +op +3 |aten::add +op +3 .*aten::mm +op +3 )")
    # A step window: only the second of the three steps is recorded.
    add_test(NAME cli.run_step_window COMMAND sightline run -o ${CMAKE_CURRENT_BINARY_DIR}/run_window --steps 2:2 --
             $<TARGET_FILE:sightline_test_torch_ops>)
    set_tests_properties(cli.run_step_window PROPERTIES PASS_REGULAR_EXPRESSION
      "step window 2:2 recorded.*1 step\\(s\\) found by user range.*aten::mm +op +1 ")
    # Two warm-up steps with only optimizer ranges, then step ranges: counted by the optimizer
    # until the first step range begins, so that 3:3 is the third train_step alone (it held the
    # first one too when the switch came at that range's end).
    add_test(NAME cli.run_step_window_after_warmup COMMAND sightline run -o ${CMAKE_CURRENT_BINARY_DIR}/run_window_warmup
             --steps 3:3 -- $<TARGET_FILE:sightline_test_torch_ops> 2)
    set_tests_properties(cli.run_step_window_after_warmup PROPERTIES PASS_REGULAR_EXPRESSION
      "step window 3:3 recorded.*1 step\\(s\\) found by user range.*aten::mm +op +1 "
      FAIL_REGULAR_EXPRESSION "aten::sub")
  endif()
  if(TARGET sightline_test_fork_ops)
    # Multi-process: the capture is named with RANK; a forked worker writes nothing, so the one
    # capture holds the parent's two steps and none of the worker's ops.
    add_test(NAME cli.run_fork_and_rank COMMAND ${CMAKE_COMMAND} -E env RANK=3 WORLD_SIZE=4
             $<TARGET_FILE:sightline> run -o ${CMAKE_CURRENT_BINARY_DIR}/run_fork -- $<TARGET_FILE:sightline_test_fork_ops>)
    set_tests_properties(cli.run_fork_and_rank PROPERTIES
      PASS_REGULAR_EXPRESSION "1 capture\\(s\\).*-rank3.slcap.*2 step\\(s\\) found by user range.*aten::mm +op +2 "
      FAIL_REGULAR_EXPRESSION "worker_batch")
  endif()
  if(TARGET sightline_test_long_ops)
    add_test(NAME cli.attach_windows
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/attach_test.sh $<TARGET_FILE:sightline> $<TARGET_FILE:sightline_collector>
                     $<TARGET_FILE:sightline_test_long_ops> ${CMAKE_CURRENT_BINARY_DIR}/attach_test)
    set_tests_properties(cli.attach_windows PROPERTIES TIMEOUT 60)
  endif()
  if(TARGET sightline_mock_cupti)
    add_test(NAME cli.cupti_detach_between_windows
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cupti_detach_test.sh $<TARGET_FILE:sightline> $<TARGET_FILE:sightline_collector>
                     $<TARGET_FILE:sightline_mock_cupti> $<TARGET_FILE:sightline_test_mock_cuda_job>
                     ${CMAKE_CURRENT_BINARY_DIR}/cupti_detach_test)
    set_tests_properties(cli.cupti_detach_between_windows PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "all checks passed")
    # --hw where counters cannot be read: one line, everything else recorded (docs/hardware.md).
    add_test(NAME cli.hw_unavailable
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hw_degrade_test.sh $<TARGET_FILE:sightline> $<TARGET_FILE:sightline_collector>
                     $<TARGET_FILE:sightline_mock_cupti> $<TARGET_FILE:sightline_test_mock_cuda_job>
                     ${CMAKE_CURRENT_BINARY_DIR}/hw_degrade_test)
    set_tests_properties(cli.hw_unavailable PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "all checks passed")
    # Activities without the launch calls: the job's stderr says which GPU work stays unlinked
    # (with no API calls, all of it only where launches cannot be counted: SIGHTLINE_LAUNCH_HOOKS=0).
    foreach(case "no_api_calls|kernel,memcpy,memset|SIGHTLINE_LAUNCH_HOOKS=0|neither runtime nor driver API calls are recorded, and the job's launch calls cannot be counted"
                 "no_driver_calls|kernel,runtime|SIGHTLINE_LAUNCH_HOOKS=1|launched through the CUDA driver API \\(cuBLAS, Triton\\) will not be linked")
      string(REPLACE "|" ";" parts "${case}")
      list(GET parts 0 name)
      list(GET parts 1 acts)
      list(GET parts 2 hooks)
      list(GET parts 3 expected)
      add_test(NAME cli.run_unlinked_${name}
               COMMAND ${CMAKE_COMMAND} -E env SIGHTLINE_CUPTI_PATH=$<TARGET_FILE:sightline_mock_cupti> ${hooks}
                       $<TARGET_FILE:sightline> run --no-import --activities ${acts} -o ${CMAKE_CURRENT_BINARY_DIR}/run_unlinked_${name}
                       -- $<TARGET_FILE:sightline_test_mock_cuda_job> ${CMAKE_CURRENT_BINARY_DIR}/run_unlinked_${name}/stop 1)
      set_tests_properties(cli.run_unlinked_${name} PROPERTIES TIMEOUT 30 PASS_REGULAR_EXPRESSION "${expected}")
    endforeach()
    # Kernels only (--activities=kernel): the launches the job makes through the driver's cuGetProcAddress (found with
    # dlsym) are counted, and each matched with the kernel CUPTI numbered; the same through
    # cuGetProcAddress's first ABI (MOCK_GPA_ABI=1); and the kernel names are asked of the driver and
    # checked: names that disagree with CUPTI's leave every call unmatched, not paired by number.
    # The job's host synchronisations are recorded (cuCtxSynchronize in the version with a context,
    # which must reach the driver through the wrapper) and reported. With the default activities
    # (_default): the same light mode where launches can be counted (the preloaded collector),
    # every kind, CUPTI's API records included, where they cannot (_default_unhooked).
    set(counted "Launch calls counted by the collector \\(no CUPTI API records\\): [1-9][0-9,]*, of which")
    set(syncs "host synchronisations [1-9][0-9]*, failed 0.*host synchronisations [1-9][0-9.]* a step")
    set(kernels "--activities=kernel")
    foreach(case "|MOCK_GPA_ABI=2|${kernels}|linked to ops by counting the job's launch, copy and set calls.*${syncs}.*${counted} 0 could not be matched"
                 "_gpa_v1|MOCK_GPA_ABI=1|${kernels}|${syncs}.*${counted} 0 could not be matched"
                 "_names_checked|MOCK_FUNC_NAME=another_kernel|${kernels}|${counted} [1-9][0-9,]* could not be matched"
                 "_default|||no CUDA API calls recorded \\(--activities all records them\\).*mock cupti: .* launch calls recorded 0 .*${syncs}.*${counted} 0 could not be matched"
                 "_default_unhooked|SIGHTLINE_LAUNCH_HOOKS=0||mock cupti: .* launch calls recorded [1-9][0-9]* .*CUDA API calls linked")
      string(REPLACE "|" ";" parts "${case}")
      list(GET parts 0 name)
      list(GET parts 1 mock_env)
      list(GET parts 2 activities)
      list(GET parts 3 expected)
      add_test(NAME cli.run_counted_launches${name}
               COMMAND ${CMAKE_COMMAND} -E env SIGHTLINE_CUPTI_PATH=$<TARGET_FILE:sightline_mock_cupti>
                       MOCK_CUDA_DRIVER=$<TARGET_FILE:sightline_mock_cuda_driver> ${mock_env}
                       $<TARGET_FILE:sightline> run ${activities} -o ${CMAKE_CURRENT_BINARY_DIR}/run_counted_launches${name}
                       -- $<TARGET_FILE:sightline_test_mock_cuda_job> ${CMAKE_CURRENT_BINARY_DIR}/run_counted_launches${name}/stop 1)
      set_tests_properties(cli.run_counted_launches${name} PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "${expected}")
    endforeach()
  endif()
  if(TARGET sightline_test_dlsym_next)
    add_test(NAME collector.dlsym_next COMMAND sightline_test_dlsym_next)
    add_test(NAME collector.dlsym_next_preloaded
             COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:sightline_collector> $<TARGET_FILE:sightline_test_dlsym_next>)
    set_tests_properties(collector.dlsym_next collector.dlsym_next_preloaded PROPERTIES PASS_REGULAR_EXPRESSION "^next 2 default 1")
  endif()
  add_test(NAME cli.run_bad_steps COMMAND sightline run --steps 5:2 -- /bin/true)
  set_tests_properties(cli.run_bad_steps PROPERTIES WILL_FAIL TRUE)
  # A misspelt activity is refused before the job runs, with the known ones named.
  add_test(NAME cli.run_bad_activity COMMAND sightline run --activities kernel,memcopy -- /bin/true)
  set_tests_properties(cli.run_bad_activity PROPERTIES WILL_FAIL TRUE)
  add_test(NAME cli.run_bad_activity_message COMMAND ${CMAKE_COMMAND} -E env
           sh -c "$<TARGET_FILE:sightline> run --activities kernel,memcopy -- /bin/true 2>&1 || true")
  set_tests_properties(cli.run_bad_activity_message PROPERTIES
    PASS_REGULAR_EXPRESSION "unknown activity 'memcopy' \\(known: kernel,memcpy,memset,runtime,driver,sync,nvtx,overhead. or all, or default alone\\)")
endif()

# Several ranks of one job analysed together.
add_test(NAME cli.ranks COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/ranks_cli_test.py $<TARGET_FILE:sightline>
         ${CMAKE_CURRENT_BINARY_DIR}/ranks_test)
# A two-process gloo job on the CPU, each rank under `sightline run`, merged by `sightline ranks`
# (needs the Python torch that scripts/setup.sh installs; skipped without it).
if(TARGET sightline_collector)
  add_test(NAME cli.ranks_gloo_job
           COMMAND ${CMAKE_COMMAND} -E env SIGHTLINE_TORCH_BRIDGE=$<TARGET_FILE_DIR:sightline_collector>/libsightline_torch.so
                   python3 ${CMAKE_CURRENT_SOURCE_DIR}/ranks/gloo_ranks_test.py $<TARGET_FILE:sightline>
                   ${PROJECT_SOURCE_DIR}/scripts/torch-python ${CMAKE_CURRENT_BINARY_DIR}/gloo_ranks)
  set_tests_properties(cli.ranks_gloo_job PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE)
endif()
