/*
 * osc_fastrma_component.c — the osc component of mca_osc_fastrma.so: version check at open,
 * the priority parameter osc_fastrma_priority, the query that refuses what the engine cannot
 * serve (Open MPI then asks the next component), and window creation on the engine.
 *
 * The engine is the process's one engine (libfastrma): it starts at the first window this
 * component creates and stops inside MPI_Finalize (its MPI_COMM_SELF delete hook, which Open
 * MPI runs before it tears anything down), as under the drop-in.
 */
#include "osc_fastrma.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/communicator/communicator.h"
#include "ompi/errhandler/errhandler.h"
#include "ompi/proc/proc.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/hwloc/base/base.h"
#include "opal/util/info.h"
#include "opal/util/info_subscriber.h"

static int priority = 0; /* osc_fastrma_priority */

/* The Open MPI this process runs, from MPI_Get_library_version ("Open MPI v4.1.4, ..."),
 * which libmpi builds from its own version; FASTRMA_FAULT=osc_version_mismatch reports a
 * different one (tests). Returns 0 if the string names no version. */
static int runtime_version(int* major, int* minor, int* release, char* text, int len) {
    int n = 0;
    PMPI_Get_library_version(text, &n);
    const char* v = strstr(text, "Open MPI v");
    if (!v || sscanf(v, "Open MPI v%d.%d.%d", major, minor, release) != 3) return 0;
    const char* fault = getenv("FASTRMA_FAULT");
    if (fault && strcmp(fault, "osc_version_mismatch") == 0) {
        ++*minor;
        snprintf(text, (size_t)len, "Open MPI v%d.%d.%d (FASTRMA_FAULT=osc_version_mismatch)", *major, *minor,
                 *release);
    }
    return 1;
}

/* Refuses to load into an Open MPI other than the one whose headers it was built against: the
 * module table and ompi_win_t's layout are that version's. */
static int component_open(void) {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int major = 0, minor = 0, release = 0;
    if (runtime_version(&major, &minor, &release, text, (int)sizeof text) && major == OMPI_MAJOR_VERSION &&
        minor == OMPI_MINOR_VERSION && release == OMPI_RELEASE_VERSION)
        return OMPI_SUCCESS;
    char* nl = strchr(text, ',');
    if (nl) *nl = '\0';
    fprintf(stderr,
            "mca_osc_fastrma: built for Open MPI %d.%d.%d, but this process runs %s: the component is not "
            "loaded (rebuild fastrma against this Open MPI)\n",
            OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION, text[0] ? text : "an unknown version");
    return OMPI_ERROR;
}

static int component_register(void);
static int component_init(bool enable_progress_threads, bool enable_mpi_threads);
static int component_finalize(void);
static int component_query(struct ompi_win_t* win, void** base, size_t size, int disp_unit,
                           struct ompi_communicator_t* comm, struct opal_info_t* info, int flavor);
static int component_select(struct ompi_win_t* win, void** base, size_t size, int disp_unit,
                            struct ompi_communicator_t* comm, struct opal_info_t* info, int flavor, int* model);

/* The symbol Open MPI's component loader looks up in mca_osc_fastrma.so. */
FASTRMA_OSC_EXPORT ompi_osc_base_component_t mca_osc_fastrma_component = {
    .osc_version =
        {
            OMPI_OSC_BASE_VERSION_3_0_0,
            .mca_component_name = "fastrma",
            MCA_BASE_MAKE_VERSION(component, OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION),
            .mca_open_component = component_open,
            .mca_register_component_params = component_register,
        },
    .osc_data = {MCA_BASE_METADATA_PARAM_NONE},
    .osc_init = component_init,
    .osc_query = component_query,
    .osc_select = component_select,
    .osc_finalize = component_finalize,
};

static int component_register(void) {
    priority = 0;
    (void)mca_base_component_var_register(
        &mca_osc_fastrma_component.osc_version, "priority",
        "Priority of the fastrma osc component (0: used only when selected with --mca osc fastrma; above the other "
        "components' priorities: used by default)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY, &priority);
    return OMPI_SUCCESS;
}

static int component_init(bool enable_progress_threads, bool enable_mpi_threads) {
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

/* A backstop: the engine normally stopped already, in MPI_Finalize's MPI_COMM_SELF hook. */
static int component_finalize(void) {
    int started = 0;
    FRMA_Initialized(&started);
    if (started) FRMA_Finalize();
    return OMPI_SUCCESS;
}

static bool peers_off_node(struct ompi_communicator_t* comm) {
    for (int i = 0; i < ompi_comm_size(comm); ++i) {
        ompi_proc_t* proc = ompi_comm_peer_lookup(comm, i);
        if (!OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) return true;
    }
    return false;
}

/* Refused (-1, the next component takes the window): shared windows with peers on other
 * nodes (no load/store reaches them); other windows with peers on other nodes when MPI is not
 * at MPI_THREAD_MULTIPLE (their am transport calls MPI from the progress thread). Both answers
 * are the same on every rank of comm. */
static int component_query(struct ompi_win_t* win, void** base, size_t size, int disp_unit,
                           struct ompi_communicator_t* comm, struct opal_info_t* info, int flavor) {
    (void)win, (void)base, (void)size, (void)disp_unit, (void)info;
    if (peers_off_node(comm)) {
        if (flavor == MPI_WIN_FLAVOR_SHARED) return -1;
        int level = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&level);
        if (level < MPI_THREAD_MULTIPLE) return -1;
    }
    return priority;
}

/* The window's info as an MPI_Info of the host (what the engine reads); MPI_INFO_NULL when
 * empty. */
static MPI_Info info_to_mpi(struct opal_info_t* info) {
    int n = 0;
    if (!info || opal_info_get_nkeys(info, &n) != OPAL_SUCCESS || n == 0) return MPI_INFO_NULL;
    MPI_Info out = MPI_INFO_NULL;
    PMPI_Info_create(&out);
    for (int i = 0; i < n; ++i) {
        char key[OPAL_MAX_INFO_KEY + 1], value[OPAL_MAX_INFO_VAL + 1];
        int flag = 0;
        if (opal_info_get_nthkey(info, i, key) == OPAL_SUCCESS &&
            opal_info_get(info, key, OPAL_MAX_INFO_VAL, value, &flag) == OPAL_SUCCESS && flag)
            PMPI_Info_set(out, key, value);
    }
    return out;
}

/* MPI_Win_set_info of a hint the engine takes during the window's life: Open MPI calls this
 * with the key's new value (and once at subscription, with the value in use). */
static char* forward_hint(opal_infosubscriber_t* obj, char* key, char* value) {
    struct ompi_win_t* win = (struct ompi_win_t*)obj;
    if (!value || !win->w_osc_module) return value;
    MPI_Info info = MPI_INFO_NULL;
    PMPI_Info_create(&info);
    PMPI_Info_set(info, key, value);
    FRMA_Win_set_info(ompi_osc_fastrma_win(win), info);
    PMPI_Info_free(&info);
    return value;
}

/* The engine's info joins the Open MPI window's: its own keys (fastrma_transport, ...) as
 * they are, so MPI_Win_get_info reports them; the hints it takes after creation (no_locks,
 * accumulate_ordering, accumulate_ops) subscribed, so MPI_Win_set_info reaches it. */
static void publish_engine_info(struct ompi_win_t* win, FRMA_Win fw) {
    static const char* const hints[] = {"no_locks", "accumulate_ordering", "accumulate_ops"};
    MPI_Info used = MPI_INFO_NULL;
    if (FRMA_Win_get_info(fw, &used) != MPI_SUCCESS || used == MPI_INFO_NULL) return;
    int n = 0;
    PMPI_Info_get_nkeys(used, &n);
    for (int i = 0; i < n; ++i) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        PMPI_Info_get_nthkey(used, i, key);
        PMPI_Info_get(used, key, MPI_MAX_INFO_VAL, value, &flag);
        if (!flag) continue;
        if (strncmp(key, "fastrma_", 8) == 0) {
            if (win->super.s_info) opal_info_set(win->super.s_info, key, value);
            continue;
        }
        for (size_t h = 0; h < sizeof hints / sizeof hints[0]; ++h)
            if (strcmp(key, hints[h]) == 0) opal_infosubscribe_subscribe(&win->super, key, value, forward_hint);
    }
    PMPI_Info_free(&used);
}

/* The engine's message of the calling thread's last error, on stderr (Open MPI's own abort
 * message names only the class). */
static void print_engine_message(void) {
    fprintf(stderr, "fastrma: %s\n", FRMA_Last_error_message());
    fflush(stderr);
}

/* Engine windows carry their Open MPI window as the attribute of this keyval, for
 * report_error. */
static int ompi_win_keyval = MPI_KEYVAL_INVALID;
static MPI_Errhandler report_handler = MPI_ERRHANDLER_NULL;

/* The engine windows' error handler: the engine's message goes to stderr when the Open MPI
 * window's handler is MPI_ERRORS_ARE_FATAL. The class itself goes back to Open MPI's binding,
 * which calls that handler. */
static void report_error(FRMA_Win* fw, int* code, ...) {
    (void)code;
    struct ompi_win_t* win = NULL;
    int flag = 0;
    if (FRMA_Win_get_attr(*fw, ompi_win_keyval, &win, &flag) == MPI_SUCCESS && flag &&
        win->error_handler == &ompi_mpi_errors_are_fatal.eh)
        print_engine_message();
}

static void make_report_handler(void) {
    FRMA_Win_create_keyval(NULL, NULL, &ompi_win_keyval, NULL);
    FRMA_Win_create_errhandler(report_error, &report_handler);
}

/* Creates the engine's window. A creation failure reaches comm's handler once, from Open
 * MPI's binding (MPI_ERR_WIN): the engine's own report to that handler is held back meanwhile,
 * and its message printed when that handler is MPI_ERRORS_ARE_FATAL. */
static int component_select(struct ompi_win_t* win, void** base, size_t size, int disp_unit,
                            struct ompi_communicator_t* comm, struct opal_info_t* info, int flavor, int* model) {
    ompi_osc_fastrma_module_t* module = calloc(1, sizeof *module);
    if (!module) return OMPI_ERR_OUT_OF_RESOURCE;
    MPI_Errhandler comm_eh = MPI_ERRHANDLER_NULL;
    PMPI_Comm_get_errhandler(comm, &comm_eh);
    PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Info minfo = info_to_mpi(info);
    int rc = MPI_ERR_WIN;
    switch (flavor) {
    case MPI_WIN_FLAVOR_CREATE:
        rc = FRMA_Win_create(*base, (MPI_Aint)size, disp_unit, minfo, comm, &module->win);
        break;
    case MPI_WIN_FLAVOR_ALLOCATE:
        rc = FRMA_Win_allocate((MPI_Aint)size, disp_unit, minfo, comm, base, &module->win);
        break;
    case MPI_WIN_FLAVOR_SHARED:
        rc = FRMA_Win_allocate_shared((MPI_Aint)size, disp_unit, minfo, comm, base, &module->win);
        break;
    case MPI_WIN_FLAVOR_DYNAMIC:
        rc = FRMA_Win_create_dynamic(minfo, comm, &module->win); /* base is NULL here */
        break;
    }
    if (minfo != MPI_INFO_NULL) PMPI_Info_free(&minfo);
    PMPI_Comm_set_errhandler(comm, comm_eh);
    const bool comm_fatal = comm_eh == &ompi_mpi_errors_are_fatal.eh;
    if (comm_eh != MPI_ERRORS_RETURN && !comm_fatal) PMPI_Errhandler_free(&comm_eh);
    if (rc != MPI_SUCCESS) {
        if (comm_fatal) print_engine_message();
        free(module);
        return rc;
    }
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_report_handler);
    FRMA_Win_set_attr(module->win, ompi_win_keyval, win);
    FRMA_Win_set_errhandler(module->win, report_handler);
    module->super = ompi_osc_fastrma_module_template;
    win->w_osc_module = &module->super;
    publish_engine_info(win, module->win);
    *model = MPI_WIN_UNIFIED;
    return OMPI_SUCCESS;
}
