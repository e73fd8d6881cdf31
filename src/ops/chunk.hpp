// chunk.hpp — one contiguous piece of a transfer, as the layouts zip it and the transports
// move it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fastrma::detail {

// Local buffer <-> [offset, offset + len) at the peer.
struct Chunk {
    void* local;
    std::uint64_t offset;
    std::size_t len;
};

}  // namespace fastrma::detail
