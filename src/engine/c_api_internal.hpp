// c_api_internal.hpp — for tests only: reach the Window and Engine behind the C handles.
#pragma once

#include <fastrma/fastrma.h>

namespace fastrma::detail {
class Window;
class Engine;
Window* window_of(FRMA_Win win);
Engine* current_engine();
}  // namespace fastrma::detail
