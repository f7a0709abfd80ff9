{{ config(materialized='table') }}
select c.id as customer_id, c.name, c.tier,
       count(o.id) as orders, coalesce(sum(o.amount), 0) as total,
       max(o.ordered_at) as last_order
from {{ ref('customers') }} c
left join {{ ref('orders') }} o on o.customer_id = c.id
group by c.id, c.name, c.tier
