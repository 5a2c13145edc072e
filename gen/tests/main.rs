//! Integration tests of isocert-gen, one module per topic.

mod compact;
mod injections;
mod reference;
mod stream;
mod validity;
