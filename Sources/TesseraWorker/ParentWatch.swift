import Foundation
import TesseraShim

/// Ties a worker's life to the process that started it (`tessera run`'s local pool):
/// when the parent exits, for any reason, the worker goes too — its results would have
/// nowhere to go, and an orphan would hold memory and CPU for nothing.
public enum ParentWatch {
    /// Kills this process when `parent` exits: at once by the kernel
    /// (`PR_SET_PDEATHSIG` with SIGKILL), and by a check twice a second in case the
    /// parent was already gone when the signal was armed.
    public static func exit(with parent: pid_t) {
        _ = ts_set_parent_death_signal(SIGKILL)
        if getppid() != parent { _exit(0) }
        Thread.detachNewThread {
            while getppid() == parent { usleep(500_000) }
            _exit(0)
        }
    }
}
