//! A tiny single-threaded executor for the futures of one connection's application (h3's
//! are poll-based and need no runtime). Whoever drives the connection polls it after each
//! [`Bridge::pump`](crate::h3::Bridge::pump); a task runs again only when something woke it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Set by any waker of this executor's tasks.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Spawns tasks onto its [`Tasks`] from inside other tasks.
#[derive(Clone, Default)]
pub struct Spawner {
    new: Rc<RefCell<Vec<Task>>>,
}

impl Spawner {
    pub fn spawn(&self, f: impl Future<Output = ()> + 'static) {
        self.new.borrow_mut().push(Box::pin(f));
    }
}

/// The tasks of one connection.
pub struct Tasks {
    tasks: Vec<Task>,
    spawner: Spawner,
    flag: Arc<Flag>,
    waker: Waker,
}

impl Default for Tasks {
    fn default() -> Self {
        let flag = Arc::new(Flag(AtomicBool::new(true)));
        Tasks {
            tasks: Vec::new(),
            spawner: Spawner::default(),
            waker: Waker::from(flag.clone()),
            flag,
        }
    }
}

impl Tasks {
    pub fn spawner(&self) -> Spawner {
        self.spawner.clone()
    }

    /// Polls every task once if anything woke since the last call or a task was spawned;
    /// returns whether it polled.
    pub fn run_once(&mut self) -> bool {
        let spawned = std::mem::take(&mut *self.spawner.new.borrow_mut());
        let woke = self.flag.0.swap(false, Ordering::Relaxed);
        if !woke && spawned.is_empty() {
            return false;
        }
        self.tasks.extend(spawned);
        let mut cx = Context::from_waker(&self.waker);
        self.tasks
            .retain_mut(|t| t.as_mut().poll(&mut cx) == Poll::Pending);
        true
    }
}
