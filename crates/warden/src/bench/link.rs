//! How a session's requests reach the server: through the independent `zookeeper-client`
//! crate, or through the lean driver (lean.rs). Either way a request goes out with what the
//! session must count and remember once it is answered ([`Sent`]), and comes back with it
//! ([`Done`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use warden_proto::request::{
    CheckVersionRequest, CreateRequest, DeleteRequest, PathWatchRequest, SetDataRequest,
};
use warden_proto::types::Acl;
use zookeeper_client as zk;

use super::lean::LeanLink;
use super::session::Request;
use super::stats::OpKind;
use super::tree::persistent;
use super::workload::MultiPart;

/// How a session's requests reach the server.
pub enum Link {
    /// Through the independent `zookeeper-client` crate: each request is a future of its own.
    Client {
        client: Arc<zk::Client>,
        in_flight: FuturesUnordered<InFlight>,
    },
    /// Straight onto the socket ([`LeanLink`]); answers come in the order sent.
    Lean {
        link: LeanLink,
        sent: VecDeque<Sent>,
    },
}

/// A request on its way: what to count and remember when it is answered.
pub struct Sent {
    pub kind: OpKind,
    pub counted: bool,
    pub started: Instant,
    pub creates: Vec<u64>,
    pub deletes: Vec<u64>,
    /// Znodes the request makes (less those it removes) if it succeeds.
    pub znodes: i64,
}

/// Resolves when a watch fires.
pub type Fired = Pin<Box<dyn Future<Output = ()> + Send>>;

pub struct Done {
    pub sent: Sent,
    pub finished: Instant,
    /// On success, the watch the request left (its path), if it left one.
    pub result: Result<Option<(String, Fired)>, zk::Error>,
}

type InFlight = Pin<Box<dyn Future<Output = Done> + Send>>;

impl Link {
    /// Through the independent client.
    pub fn client(client: zk::Client) -> Link {
        Link::Client {
            client: Arc::new(client),
            in_flight: FuturesUnordered::new(),
        }
    }

    /// Through the lean driver.
    pub fn lean(link: LeanLink) -> Link {
        Link::Lean {
            link,
            sent: VecDeque::new(),
        }
    }

    /// The client's state, to wait for its close after the run (the lean driver closes its
    /// session itself).
    pub fn state_watcher(&self) -> Option<zk::StateWatcher> {
        match self {
            Link::Client { client, .. } => Some(client.state_watcher()),
            Link::Lean { .. } => None,
        }
    }

    pub fn send(&mut self, request: Request, sent: Sent) {
        match self {
            Link::Client { client, in_flight } => {
                let client = client.clone();
                in_flight.push(send_now(async move {
                    let result = execute(&client, request).await;
                    Done {
                        sent,
                        finished: Instant::now(),
                        result,
                    }
                }));
            }
            Link::Lean { link, sent: queue } => {
                link.send(&wire(request));
                queue.push_back(sent);
            }
        }
    }

    /// Lets the requests sent so far leave (the client sends each at once).
    pub async fn flush(&mut self) {
        if let Link::Lean { link, .. } = self {
            link.flush().await;
        }
    }

    pub fn in_flight(&self) -> usize {
        match self {
            Link::Client { in_flight, .. } => in_flight.len(),
            Link::Lean { sent, .. } => sent.len(),
        }
    }

    /// The next answer; `None` when nothing is in flight.
    pub async fn next(&mut self) -> Option<Done> {
        match self {
            Link::Client { in_flight, .. } => in_flight.next().await,
            Link::Lean { link, sent } => {
                let answer = link.next().await?;
                let sent = sent.pop_front().expect("one sent per request pending");
                Some(Done {
                    sent,
                    finished: Instant::now(),
                    result: answer.result.map(|()| {
                        answer.watch.map(|(path, fired)| {
                            let fired: Fired = Box::pin(async move {
                                let _ = fired.await;
                            });
                            (path, fired)
                        })
                    }),
                })
            }
        }
    }

    /// Ends the session: the lean driver closes it; a client closes when it is dropped.
    pub async fn close(self) {
        if let Link::Lean { link, .. } = self {
            link.close().await;
        }
    }
}

/// The request as the lean driver sends it (the same operations the client sends).
fn wire(request: Request) -> warden_proto::Request {
    use warden_proto::Request as W;
    let create = |path, value| {
        W::Create(CreateRequest {
            path,
            data: Some(value),
            acl: Acl::open(),
            flags: 0,
        })
    };
    let delete = |path| W::Delete(DeleteRequest { path, version: -1 });
    let set = |path, value| {
        W::SetData(SetDataRequest {
            path,
            data: Some(value),
            version: -1,
        })
    };
    match request {
        Request::Create { path, value } => create(path, value),
        Request::Delete { path } => delete(path),
        Request::Set { path, value } => set(path, value),
        Request::Get { path, watch } => W::GetData(PathWatchRequest { path, watch }),
        Request::Exists { path, watch } => W::Exists(PathWatchRequest { path, watch }),
        Request::List { path, watch } => W::GetChildren(PathWatchRequest { path, watch }),
        Request::Multi { parts } => W::Multi(
            parts
                .into_iter()
                .map(|(part, path, value)| match part {
                    MultiPart::Create => create(path, value),
                    MultiPart::Delete => delete(path),
                    MultiPart::Set => set(path, value),
                    MultiPart::Check => W::Check(CheckVersionRequest { path, version: -1 }),
                })
                .collect(),
        ),
    }
}

/// Polls a request's future once, so that the request leaves now. (The client sends a request
/// when its method is called; here that call sits inside an async block, which runs at its
/// first poll.) Requests thus leave in the order they were drawn, and latency is timed from
/// the moment they leave. A no-op waker is enough: the next poll registers the real one.
fn send_now(future: impl Future<Output = Done> + Send + 'static) -> InFlight {
    let mut future: InFlight = Box::pin(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(done) => Box::pin(std::future::ready(done)),
        Poll::Pending => future,
    }
}

/// Sends one request and waits for its answer. Every branch calls the client before its first
/// await, so the request leaves at the first poll.
async fn execute(
    client: &zk::Client,
    request: Request,
) -> Result<Option<(String, Fired)>, zk::Error> {
    match request {
        Request::Create { path, value } => client
            .create(&path, &value, &persistent())
            .await
            .map(|_| None),
        Request::Delete { path } => client.delete(&path, None).await.map(|()| None),
        Request::Set { path, value } => client.set_data(&path, &value, None).await.map(|_| None),
        Request::Get { path, watch: false } => client.get_data(&path).await.map(|_| None),
        Request::Get { path, watch: true } => {
            let (_, _, watcher) = client.get_and_watch_data(&path).await?;
            Ok(Some((path, fired(watcher))))
        }
        Request::Exists { path, watch: false } => client.check_stat(&path).await.map(|_| None),
        Request::Exists { path, watch: true } => {
            let (_, watcher) = client.check_and_watch_stat(&path).await?;
            Ok(Some((path, fired(watcher))))
        }
        Request::List { path, watch: false } => client.list_children(&path).await.map(|_| None),
        Request::List { path, watch: true } => {
            let (_, watcher) = client.list_and_watch_children(&path).await?;
            Ok(Some((path, fired(watcher))))
        }
        Request::Multi { parts } => {
            let options = persistent();
            let mut writer = client.new_multi_writer();
            for (part, path, value) in &parts {
                match part {
                    MultiPart::Create => writer.add_create(path, value, &options)?,
                    MultiPart::Delete => writer.add_delete(path, None)?,
                    MultiPart::Set => writer.add_set_data(path, value, None)?,
                    // Version -1 matches any version: the check costs the server a lookup and passes.
                    MultiPart::Check => writer.add_check_version(path, -1)?,
                }
            }
            writer.commit().await.map(|_| None).map_err(zk::Error::from)
        }
    }
}

fn fired(watcher: zk::OneshotWatcher) -> Fired {
    Box::pin(async move {
        watcher.changed().await;
    })
}
