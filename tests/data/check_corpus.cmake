# Regenerates data/corpus_byte.{bin,idx,range} from data/corpus.txt with
# megahost_prepare and fails unless the result is byte-identical to what is
# shipped. Run by ctest (data.corpus_byte_reproducible).
#   cmake -DPREPARE=<megahost_prepare> -DDATA_DIR=<repo>/data -DWORK_DIR=<dir> -P check_corpus.cmake
set(prefix "${WORK_DIR}/corpus_byte")
execute_process(
  COMMAND "${PREPARE}" --input=${DATA_DIR}/corpus.txt --tokenizer=byte --output_prefix=${prefix}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "megahost_prepare failed (${rc})")
endif()
foreach(ext bin idx range)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${prefix}.${ext}"
                          "${DATA_DIR}/corpus_byte.${ext}"
                  RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "data/corpus_byte.${ext} differs from what megahost_prepare makes of "
                        "data/corpus.txt; regenerate it: megahost_prepare --input=data/corpus.txt "
                        "--tokenizer=byte --output_prefix=data/corpus_byte")
  endif()
endforeach()
message(STATUS "data/corpus_byte.bin and .idx match a fresh megahost_prepare run")
