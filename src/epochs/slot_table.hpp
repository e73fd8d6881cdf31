// slot_table.hpp — the top of the 3D queue: slots[n], rank r lives in slots[r % n].
// Each slot has its own mutex and a short list of the Targets that hash to it, so
// threads working on different targets do not contend.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "base/spin_lock.hpp"
#include "epochs/target.hpp"

namespace fastrma::detail {

struct Slot {
    SpinLock mu;
    Target* head = nullptr;
};

class SlotTable {
public:
    explicit SlotTable(std::size_t n) : slots_(n ? n : 1) {}
    std::size_t size() const { return slots_.size(); }
    // No division when rank < n (every rank of a window at most n wide): a 64-bit div is
    // tens of cycles, and a lock + op + unlock looks the slot up eight times.
    Slot& slot_of(int rank) {
        std::size_t i = std::size_t(rank);
        if (i >= slots_.size()) i %= slots_.size();
        return slots_[i];
    }
    Slot& slot_at(std::size_t i) { return slots_[i]; }
    // The caller holds slot_of(rank).mu for these three (find inline: every lock, op and
    // unlock of a lock epoch looks its target up).
    Target* find(int rank) {
        for (Target* t = slot_of(rank).head; t; t = t->next)
            if (t->rank == rank) return t;
        return nullptr;
    }
    void insert(Target* t);
    void remove(Target* t);

private:
    std::vector<Slot> slots_;
};

}  // namespace fastrma::detail
