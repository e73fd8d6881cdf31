/*
 * osc_fastrma.h — what the two files of mca_osc_fastrma.so share.
 *
 * mca_osc_fastrma.so is an Open MPI osc component (docs/osc_component.md): Open MPI keeps the
 * MPI_Win object (attributes, keyvals, names, error handlers, language bindings) and calls the
 * module of each window this component selected; the module forwards every call to the
 * window's FRMA_Win. The FRMA_Win returns MPI error classes (its own handler only prints the
 * engine's message when the MPI_Win's handler is fatal), which Open MPI's bindings hand to the
 * MPI_Win's handler.
 *
 * C, not C++: Open MPI's internal headers do not compile as C++.
 */
#ifndef FASTRMA_OSC_FASTRMA_H
#define FASTRMA_OSC_FASTRMA_H

#include "ompi_config.h"

#include <fastrma/fastrma.h>

#include "ompi/mca/osc/osc.h"
#include "ompi/win/win.h"

typedef struct ompi_osc_fastrma_module_t {
    ompi_osc_base_module_t super; /* first: Open MPI's w_osc_module points here */
    FRMA_Win win;
} ompi_osc_fastrma_module_t;

/* The module's table of entry points (osc_fastrma_module.c). */
extern const ompi_osc_base_module_t ompi_osc_fastrma_module_template;

/* The engine's window behind an Open MPI window this component serves. */
static inline FRMA_Win ompi_osc_fastrma_win(struct ompi_win_t* win) {
    return ((ompi_osc_fastrma_module_t*)win->w_osc_module)->win;
}

#endif /* FASTRMA_OSC_FASTRMA_H */
