//! Connecting to a coordinator: a lazily connected channel (it reconnects by itself after a
//! coordinator restart), the token on every call, optional TLS.

use std::time::Duration;

use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Status};

use crate::ClusterError;
use crate::auth::Token;
use crate::pb::coordinator_client::CoordinatorClient;

/// Adds the token to every request.
#[derive(Clone, Debug)]
pub struct Auth(pub Token);

impl Interceptor for Auth {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        self.0.attach(req)
    }
}

/// A coordinator client.
pub type Client = CoordinatorClient<InterceptedService<Channel, Auth>>;

/// Connects (lazily) to `url` (`http://host:port`, or `https://` with `ca` the PEM of the
/// certificate authority to trust).
pub fn connect(
    url: &str,
    token: Token,
    ca: Option<&std::path::Path>,
) -> Result<Client, ClusterError> {
    let mut ep = Endpoint::from_shared(url.to_string())
        .map_err(|e| ClusterError::Config(format!("bad coordinator url {url}: {e}")))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30));
    if let Some(ca) = ca {
        let pem = std::fs::read(ca)
            .map_err(|e| ClusterError::Config(format!("cannot read {}: {e}", ca.display())))?;
        ep = ep.tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))?;
    }
    Ok(
        CoordinatorClient::with_interceptor(ep.connect_lazy(), Auth(token))
            .max_decoding_message_size(crate::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(crate::MAX_MESSAGE_BYTES),
    )
}

/// A refused job submission as an error: an invalid job (bad pipeline, output in use) as its
/// own message, anything else naming the coordinator.
pub fn submit_err(addr: &str, s: Status) -> ClusterError {
    match s.code() {
        tonic::Code::InvalidArgument => ClusterError::Invalid(s.message().to_string()),
        _ => rpc_err(addr, s),
    }
}

/// A status as an error naming the coordinator.
pub fn rpc_err(addr: &str, s: Status) -> ClusterError {
    ClusterError::Rpc {
        addr: addr.to_string(),
        message: format!("{:?}: {}", s.code(), s.message()),
    }
}
