/*
** ndplan/comm.h -- communication on a two-level fabric: a scale-up domain (NVLink, HCCS)
** of `domain` devices and the scale-out network between domains. Collectives are priced
** with an alpha-beta model on the links they actually cross.
*/
#ifndef NDPLAN_COMM_H
#define NDPLAN_COMM_H

/* One link class, as one device sees it: achievable bytes/s per direction, and latency. */
typedef struct nd_link {
  double bandwidth;  /* bytes per second per direction per device, efficiency applied */
  double latency;    /* seconds per message step */
} nd_link;

typedef struct nd_fabric {
  int domain;        /* devices per scale-up domain */
  nd_link up;        /* inside a domain */
  nd_link out;       /* between domains (each device has its own share of the NICs) */
} nd_fabric;

/*
** A communicator: `size` ranks placed `stride` apart in the global rank order. `local`
** is how many of them share one scale-up domain (1 when each is in a different domain).
*/
typedef struct nd_group {
  int size;
  int stride;
  int local;
} nd_group;

nd_group nd_group_place (const nd_fabric *f, int size, int stride);

/*
** Times in seconds for `bytes` per rank (the full buffer each rank holds before an
** all-reduce, the gathered result of an all-gather, the input of a reduce-scatter, the
** send buffer of an all-to-all). Hierarchical where a group spans domains: the intra-domain
** phase on the scale-up links, the inter-domain phase on 1/local of the data, with every
** device driving its own NIC share in parallel.
*/
double nd_allreduce_time (const nd_fabric *f, const nd_group *g, double bytes);
double nd_allgather_time (const nd_fabric *f, const nd_group *g, double bytes);
double nd_reducescatter_time (const nd_fabric *f, const nd_group *g, double bytes);
double nd_alltoall_time (const nd_fabric *f, const nd_group *g, double bytes);
/*
** An all-to-all whose traffic is given per link class: bytes each device sends to members
** of its own scale-up domain and bytes it sends over the scale-out network (dispatchers
** that send one copy per destination node and forward inside it, like DeepEP).
*/
double nd_alltoall_split_time (const nd_fabric *f, const nd_group *g, double intra_bytes,
                               double inter_bytes);
/* Point-to-point between neighbours `stride` ranks apart. */
double nd_p2p_time (const nd_fabric *f, int stride, double bytes);

#endif
