-- A hybrid query's graph fill crosses a seed's live typed edges only when it has one: the
-- seeds are looked up with whether they do, from these small indexes (most edges are
-- co_occurs edges, which they leave out), and the hop search is not sent at all for seeds
-- without one.

CREATE INDEX entity_edges_typed_src ON entity_edges (src_id)
    WHERE valid_to IS NULL AND relation <> 'co_occurs';
CREATE INDEX entity_edges_typed_dst ON entity_edges (dst_id)
    WHERE valid_to IS NULL AND relation <> 'co_occurs';
