// slot_table.cpp — see slot_table.hpp.
#include "epochs/slot_table.hpp"

namespace fastrma::detail {

void SlotTable::insert(Target* t) {
    Slot& s = slot_of(t->rank);
    t->next = s.head;
    s.head = t;
}

void SlotTable::remove(Target* t) {
    Slot& s = slot_of(t->rank);
    for (Target** p = &s.head; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            t->next = nullptr;
            return;
        }
}

const char* rma_kind_name(RmaKind k) {
    switch (k) {
    case RmaKind::put:
        return "put";
    case RmaKind::get:
        return "get";
    case RmaKind::acc:
        return "accumulate";
    case RmaKind::get_acc:
        return "get_accumulate";
    case RmaKind::fop:
        return "fetch_and_op";
    case RmaKind::cas:
        return "compare_and_swap";
    }
    return "?";
}

}  // namespace fastrma::detail
