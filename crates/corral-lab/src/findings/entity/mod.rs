//! The Entity Manager's findings (the `[entity]` family): seed 000's testbed ([`testbed`]: Figs. 7-14) and
//! office floor ([`office`]: Table 8, Fig. 16), and the questions seed 000 left open ([`ext`]).

pub mod ext;
pub mod office;
pub mod testbed;
