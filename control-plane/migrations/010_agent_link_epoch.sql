-- Each agent link accepted by any replica takes the next number: a replica holding an older link
-- of the same machine closes it when it hears of a newer one (the `agent_links` channel).
CREATE SEQUENCE agent_link_epoch;
