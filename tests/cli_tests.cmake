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
    "gpu_only|${_inputs}/gpu_only.json|GPU activity but no CPU ops"
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

add_test(NAME cli.bad_flag COMMAND sightline report ${_fixture} --format xml)
set_tests_properties(cli.bad_flag PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli.no_subcommand COMMAND sightline)
set_tests_properties(cli.no_subcommand PROPERTIES WILL_FAIL TRUE)

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
