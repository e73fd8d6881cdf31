# The C++ API (include/fastrma/fastrma.hpp) under mpiexec with 1, 2 and 4 ranks, plus one
# run with the progress thread off (every C++ call must then make its own progress).
# Included from tests/mpi/CMakeLists.txt (uses fastrma_mpi_main and fastrma_mpi_test).
# Linked against the shared library, as an application would be.
add_executable(test_cxx ${CMAKE_CURRENT_LIST_DIR}/test_cxx.cpp)
target_link_libraries(test_cxx PRIVATE fastrma fastrma_mpi_main Threads::Threads)

foreach(n 1 2 4)
  fastrma_mpi_test(mpi_cxx_np${n} test_cxx ${n} TIMEOUT 240)
endforeach()
fastrma_mpi_test(mpi_cxx_np4_noprogress test_cxx 4 TIMEOUT 240 ENV FASTRMA_PROGRESS=0)
