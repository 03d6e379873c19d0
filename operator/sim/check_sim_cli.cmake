# ctest driver for easyscale-sim (cmake -P): runs the binary on the bundled
# trace and checks the JSON, the SVG and the terminal gain line; feeds a
# malformed trace and checks the error names the file, line and field; round-
# trips a generated trace; refuses a bad flag.
# Inputs: SIM (binary), TRACE (bundled trace), WORK (scratch folder).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

execute_process(COMMAND ${SIM} --trace ${TRACE} --json ${WORK}/out.json --svg ${WORK}/out.svg
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "easyscale-sim failed (${rc}): ${err}")
endif()
if(NOT out MATCHES "utilisation gain of easyscale over static: [+-][0-9.]+%")
  message(FATAL_ERROR "no gain line in:\n${out}")
endif()

file(READ ${WORK}/out.json json)
string(JSON n LENGTH "${json}" policies)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "expected 3 policies, got ${n}")
endif()
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${json}" policies ${i} policy)
  # Every metric is present (GET fails the script when a key is missing).
  string(JSON util GET "${json}" policies ${i} utilisation mean)
  string(JSON points LENGTH "${json}" policies ${i} utilisation series)
  string(JSON share GET "${json}" policies ${i} trainingShare)
  string(JSON done GET "${json}" policies ${i} jobs completed)
  string(JSON jct GET "${json}" policies ${i} jobs completionSeconds p95)
  string(JSON queue GET "${json}" policies ${i} jobs queueingSeconds p50)
  string(JSON preempted GET "${json}" policies ${i} preemptions workers)
  string(JSON wait GET "${json}" policies ${i} inferenceWait fractionOfDemand)
  string(JSON ms GET "${json}" policies ${i} scheduler meanMs)
  if(points LESS 100 OR done LESS 1)
    message(FATAL_ERROR "${name}: ${points} series points, ${done} jobs completed")
  endif()
  if(name STREQUAL "easyscale")
    # Inference must not wait: only a mini-batch per preempted worker.
    if(wait GREATER 0.001)
      message(FATAL_ERROR "easyscale inference waited for ${wait} of its demand")
    endif()
    set(easy_util ${util})
  endif()
  if(name STREQUAL "static")
    if(NOT preempted EQUAL 0)
      message(FATAL_ERROR "static gang preempted ${preempted} workers")
    endif()
    set(static_util ${util})
  endif()
endforeach()
if(NOT easy_util GREATER static_util)
  message(FATAL_ERROR "easyscale utilisation ${easy_util} not above static ${static_util}")
endif()
file(READ ${WORK}/out.svg svg)
string(FIND "${svg}" "<polyline" at)
if(at LESS 0 OR NOT svg MATCHES "</svg>")
  message(FATAL_ERROR "SVG has no plot")
endif()

# A malformed trace: the error names file, line and field; exit code 1.
file(WRITE ${WORK}/bad.csv "easyscale-trace,1\nnode,n1,a100,8\njob,0,j,four,1,1,0,10,*,-\n")
execute_process(COMMAND ${SIM} --trace ${WORK}/bad.csv
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
if(NOT rc EQUAL 1 OR NOT err MATCHES "bad.csv:3: field 4 \\(ests\\)")
  message(FATAL_ERROR "malformed trace: rc=${rc}, stderr: ${err}")
endif()

# The generator writes a trace the simulator reads back; one policy only.
execute_process(COMMAND ${SIM} --generate --gpus 64 --jobs 20 --days 0.5 --seed 3
    --out ${WORK}/gen.csv --no-simulate RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 30)
if(NOT rc EQUAL 0 OR NOT EXISTS ${WORK}/gen.csv)
  message(FATAL_ERROR "--generate failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${SIM} --trace ${WORK}/gen.csv --policies easyscale --json ${WORK}/gen.json
  RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 30)
file(READ ${WORK}/gen.json json)
string(JSON n LENGTH "${json}" policies)
string(JSON jobs GET "${json}" trace jobs)
if(NOT rc EQUAL 0 OR NOT n EQUAL 1 OR NOT jobs EQUAL 20)
  message(FATAL_ERROR "generated trace: rc=${rc} policies=${n} jobs=${jobs}: ${err}")
endif()

# Bad flags are refused with exit code 2 and a reason.
execute_process(COMMAND ${SIM} --policies easyscale,fifo
  RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 30)
if(NOT rc EQUAL 2 OR NOT err MATCHES "unknown policy 'fifo'")
  message(FATAL_ERROR "bad --policies: rc=${rc}, stderr: ${err}")
endif()
file(REMOVE_RECURSE ${WORK})
