//! The network between the simulated nodes of one cluster: the members topic, with
//! announcements delayed or lost as the seed says (so two nodes may both run a partition's
//! arbiter for a while), and the peer calls, with latency, answers lost on the way back, and
//! every call cut when the node it asked crashes (its tasks stop wherever they were).

use crate::lock;
use crate::rng::Rng;
use crate::seams::Crashes;
use opledger::cluster::loopback::LoopbackPeers;
use opledger::cluster::members::memory::MemoryMembers;
use opledger::cluster::members::{MembersError, MembersFeed, MembersTopic};
use opledger::cluster::peer::{PeerRequest, PeerResponse};
use opledger::cluster::transport::PeerTransport;
use opledger::partition::PartitionError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the network does wrong, per mille and in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Weather {
    /// Longest delay of an announcement.
    pub announce_delay_ms: u64,
    /// Announcements lost.
    pub lost_announcements: u32,
    /// Peer answers lost on the way back (the owner did the work).
    pub lost_peer_answers: u32,
}

/// The cluster's network.
pub struct Net {
    members: MemoryMembers,
    peers: LoopbackPeers,
    /// Each node's crash counter, by address: a call to a node that crashes is cut.
    crashes: Mutex<HashMap<String, Arc<Crashes>>>,
    weather: Mutex<Weather>,
    rng: Mutex<Rng>,
}

impl Net {
    /// A network with `weather`, its chance drawn from `rng`.
    pub fn new(weather: Weather, rng: Rng) -> Arc<Self> {
        Arc::new(Self {
            members: MemoryMembers::new(),
            peers: LoopbackPeers::new(),
            crashes: Mutex::default(),
            weather: Mutex::new(weather),
            rng: Mutex::new(rng),
        })
    }

    /// Where the node at `base` is reached, and the counter its crashes bump.
    pub fn register(&self, base: &str, crashes: Arc<Crashes>) {
        lock(&self.crashes).insert(base.to_owned(), crashes);
    }

    /// The weather clears: from now on nothing is delayed or lost. Liveness is judged after
    /// this (announcements late by more than the member timeout, for ever, make the placement
    /// flap for ever, and every handover gives running leases their full length again).
    pub fn heal(&self) {
        *lock(&self.weather) = Weather::default();
    }

    fn weather(&self) -> Weather {
        *lock(&self.weather)
    }

    /// The peer registry the nodes attach their routers to.
    pub fn peers(&self) -> &LoopbackPeers {
        &self.peers
    }

    fn draw(&self, lo: u64, hi: u64) -> u64 {
        lock(&self.rng).between(lo, hi)
    }

    fn chance(&self, permille: u32) -> bool {
        lock(&self.rng).chance(permille)
    }
}

impl MembersTopic for Net {
    fn publish(&self, bytes: Vec<u8>) {
        let weather = self.weather();
        if self.chance(weather.lost_announcements) {
            return;
        }
        let delay = self.draw(0, weather.announce_delay_ms);
        if delay == 0 {
            return self.members.publish(bytes);
        }
        let members = self.members.clone();
        // Delivered later, perhaps after a newer one (the directory keeps the newest).
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            members.publish(bytes);
        });
    }

    fn flush(&self, timeout: Duration) {
        self.members.flush(timeout);
    }

    fn subscribe(&self) -> opledger::BoxFuture<'_, Result<Box<dyn MembersFeed>, MembersError>> {
        self.members.subscribe()
    }
}

impl Net {
    /// The network as one process of a node reaches it: once the process is gone (`gone`:
    /// killed, or exited after a stop), nothing it still runs reaches another node.
    pub fn for_process(self: &Arc<Self>, gone: Arc<AtomicBool>) -> ProcessNet {
        ProcessNet {
            net: self.clone(),
            gone,
        }
    }
}

/// [`Net`] as one process reaches it.
pub struct ProcessNet {
    net: Arc<Net>,
    gone: Arc<AtomicBool>,
}

impl PeerTransport for ProcessNet {
    fn ask<'a>(
        &'a self,
        base: &'a str,
        partition: u32,
        request: &'a PeerRequest,
    ) -> opledger::BoxFuture<'a, Result<PeerResponse, PartitionError>> {
        Box::pin(async move {
            if self.gone.load(Ordering::SeqCst) {
                return Err(PartitionError::Peer("this process is gone".into()));
            }
            self.net.ask(base, partition, request).await
        })
    }
}

impl PeerTransport for Net {
    fn ask<'a>(
        &'a self,
        base: &'a str,
        partition: u32,
        request: &'a PeerRequest,
    ) -> opledger::BoxFuture<'a, Result<PeerResponse, PartitionError>> {
        Box::pin(async move {
            let lost = || PartitionError::Peer("the owner did not answer".into());
            let crashes = lock(&self.crashes).get(base).cloned().ok_or_else(lost)?;
            let seen = crashes.seen();
            tokio::time::sleep(Duration::from_micros(self.draw(0, 2_000))).await;
            let answer = tokio::select! {
                biased;
                () = crashes.after(seen) => return Err(lost()),
                answer = self.peers.ask(base, partition, request) => answer,
            };
            tokio::time::sleep(Duration::from_micros(self.draw(0, 2_000))).await;
            if self.chance(self.weather().lost_peer_answers) {
                return Err(lost());
            }
            answer
        })
    }
}
